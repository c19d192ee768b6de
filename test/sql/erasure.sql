-- wharf.erase_person: each provider's person paths at any depth, GitHub's and
-- Forgejo's push commits (commits[], head_commit) by username, ids and logins
-- compared as text, every state, installation rows, other sources untouched,
-- steps deleted.
BEGIN;
SELECT plan(28);

SELECT wharf.upsert_workspace(1);
-- One row per case, named by its delivery key. `erase_*` rows must go, `keep_*` rows stay.
CREATE FUNCTION pg_temp.event(
  p_key text, p_provider text, p_source text, p_payload jsonb,
  p_state text DEFAULT 'QUEUED', p_workspace bigint DEFAULT 1)
RETURNS bigint LANGUAGE sql AS $$
  INSERT INTO wharf.provider_event
    (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, payload, state,
     lease_epoch, leased_until, leased_by, dead_at)
  VALUES (p_workspace, p_provider, p_key, 'event', 'subject:' || p_key,
          coalesce(p_workspace::text, 'system') || ':' || p_provider || ':subject:' || p_key, p_source, p_payload,
          p_state, CASE WHEN p_state = 'LEASED' THEN 1 ELSE 0 END,
          CASE WHEN p_state = 'LEASED' THEN now() + interval '2 minutes' END,
          CASE WHEN p_state = 'LEASED' THEN 'worker-1' END,
          CASE WHEN p_state = 'DEAD' THEN now() END)
  RETURNING id
$$;
CREATE FUNCTION pg_temp.remaining(p_prefix text) RETURNS text[] LANGUAGE sql AS $$
  SELECT coalesce(array_agg(delivery_key ORDER BY delivery_key), '{}') FROM wharf.provider_event
   WHERE delivery_key LIKE p_prefix || '%'
$$;

-- GitHub and Forgejo: sender, user, author, committer, assignee, member; id and login.
SELECT pg_temp.event('gh_erase_sender_id', 'github', 'https://github.com', '{"sender": {"id": 123, "login": "someone"}}');
SELECT pg_temp.event('gh_erase_user_login', 'github', 'https://github.com', '{"pull_request": {"user": {"login": "alice"}}}');
SELECT pg_temp.event('gh_erase_deep_assignee', 'github', 'https://github.com', '{"a": {"b": [{"x": 1}, {"assignee": {"id": "123"}}]}}');
SELECT pg_temp.event('gh_erase_committer', 'github', 'https://github.com', '{"commits": [{"committer": {"login": "alice"}}]}');
SELECT pg_temp.event('gh_erase_author', 'github', 'https://github.com', '{"review": {"author": {"id": 123}}}');
SELECT pg_temp.event('gh_erase_member', 'github', 'https://github.com', '{"member": {"login": "alice"}}', 'DONE');
SELECT pg_temp.event('gh_erase_leased', 'github', 'https://github.com', '{"sender": {"login": "alice"}}', 'LEASED');
SELECT pg_temp.event('gh_erase_dead', 'github', 'https://github.com', '{"issue": {"assignee": {"login": "alice"}}}', 'DEAD');
SELECT pg_temp.event('gh_erase_installation', 'github', 'https://github.com',
                     '{"action": "created", "installation": {"id": 5}, "sender": {"id": 123}}', 'QUEUED', NULL);
SELECT pg_temp.event('gh_keep_other_person', 'github', 'https://github.com', '{"sender": {"id": 124, "login": "bob"}}');
SELECT pg_temp.event('gh_keep_other_field', 'github', 'https://github.com', '{"repository": {"id": 123, "name": "alice"}}');
SELECT pg_temp.event('gh_keep_login_as_id', 'github', 'https://github.com', '{"sender": {"id": 999, "login": "123"}}');
SELECT pg_temp.event('gh_keep_other_source', 'github', 'https://github.example.com', '{"sender": {"id": 123, "login": "alice"}}');
SELECT pg_temp.event('fj_erase_sender', 'forgejo', 'https://codeberg.org', '{"sender": {"id": 77}}');
SELECT pg_temp.event('fj_erase_user', 'forgejo', 'https://codeberg.org', '{"pull_request": {"user": {"login": "carol"}}}');
SELECT pg_temp.event('fj_keep_other', 'forgejo', 'https://codeberg.org', '{"sender": {"id": 78, "login": "dave"}}');
-- Steps of the leased row go with it.
INSERT INTO wharf.provider_event_step (event_id, step_name)
SELECT id, 'commit:1' FROM wharf.provider_event WHERE delivery_key = 'gh_erase_leased';

SELECT is(wharf.erase_person('https://github.com', '{"ids": ["123"], "logins": ["alice"]}'), 9::bigint,
          'erase_person returns how many events it deleted');
SELECT is(pg_temp.remaining('gh_'),
          ARRAY['gh_keep_login_as_id', 'gh_keep_other_field', 'gh_keep_other_person', 'gh_keep_other_source'],
          'GitHub: sender, user, author, committer, assignee and member id or login, at any depth, in every state, installation rows included');
SELECT is((SELECT count(*) FROM wharf.provider_event_step), 0::bigint, 'the steps of an erased event are deleted');
SELECT is((SELECT count(*) FROM wharf.scope WHERE head_id IS NOT NULL
                                                AND NOT EXISTS (SELECT FROM wharf.provider_event e WHERE e.id = head_id))
          + (SELECT count(*) FROM wharf.scope WHERE leased_id IS NOT NULL
                                                AND NOT EXISTS (SELECT FROM wharf.provider_event e WHERE e.id = leased_id)),
          0::bigint, 'no scope points at an erased event');
SELECT is(pg_temp.remaining('fj_'), ARRAY['fj_erase_sender', 'fj_erase_user', 'fj_keep_other'],
          'another source (Forgejo at codeberg.org) is untouched');
SELECT is(wharf.erase_person('https://codeberg.org', '{"ids": [77], "logins": ["carol"]}'), 2::bigint,
          'Forgejo: two events name the person');
SELECT is(pg_temp.remaining('fj_'), ARRAY['fj_keep_other'], 'Forgejo: sender id (a number in identities) and user login');
SELECT is(wharf.erase_person('https://github.com', '{"ids": ["123"], "logins": ["alice"]}'), 0::bigint,
          'a second erasure finds nothing left');

-- GitHub and Forgejo push events: a login also names the person as the
-- username of a commit's author or committer, in commits[] and head_commit.
-- Admitted through wharf.admit, each case once per provider (push_provider);
-- the pusher (sender) is someone else, and a commit's name and email are not
-- person paths.
CREATE FUNCTION pg_temp.push(p_key text, p_provider text, p_source text, p_payload jsonb)
RETURNS bigint LANGUAGE sql AS $$
  SELECT (wharf.admit(p_provider, p_source, p_key, 'push', jsonb_build_object('connection_id', c.id),
                      ARRAY['repo:acme/api'], p_payload, '{}') -> 'events' -> 0 ->> 'event_id')::bigint
    FROM wharf.connection c
   WHERE c.workspace_id = 1 AND c.provider = p_provider AND c.source = p_source
$$;
SELECT wharf.subscribe(wharf.upsert_connection(1, c.provider, c.source, c.kind, NULL), 'repo:acme/api')
  FROM (VALUES ('github', 'https://github.com', 'pat'), ('forgejo', 'https://codeberg.org', 'webhook'),
               ('gitlab', 'https://gitlab.example.com', 'webhook')) AS c(provider, source, kind);
CREATE TEMP TABLE push_provider (prefix text, provider text, source text);
INSERT INTO push_provider VALUES ('pu_gh', 'github', 'https://github.com'), ('pu_fj', 'forgejo', 'https://codeberg.org');
SELECT pg_temp.push(prefix || '_erase_commit_author', provider, source,
                    '{"sender": {"id": 9, "login": "ivan"},
                      "commits": [{"id": "c1", "author": {"name": "Grace", "email": "grace@example.com", "username": "grace"},
                                   "committer": {"name": "Ivan", "username": "ivan"}}],
                      "head_commit": {"id": "c1", "author": {"username": "ivan"}, "committer": {"username": "ivan"}}}')
  FROM push_provider;
SELECT pg_temp.push(prefix || '_erase_commit_committer', provider, source,
                    '{"sender": {"id": 9, "login": "ivan"},
                      "commits": [{"id": "c1", "author": {"username": "ivan"}, "committer": {"username": "ivan"}},
                                  {"id": "c2", "author": {"username": "ivan"}, "committer": {"username": "grace"}}]}')
  FROM push_provider;
SELECT pg_temp.push(prefix || '_erase_head_author', provider, source,
                    '{"sender": {"id": 9, "login": "ivan"},
                      "head_commit": {"id": "c3", "author": {"username": "grace"}, "committer": {"username": "ivan"}}}')
  FROM push_provider;
SELECT pg_temp.push(prefix || '_erase_head_committer', provider, source,
                    '{"sender": {"id": 9, "login": "ivan"},
                      "head_commit": {"id": "c4", "author": {"username": "ivan"}, "committer": {"username": "grace"}}}')
  FROM push_provider;
SELECT pg_temp.push(prefix || '_keep_other_author', provider, source,
                    '{"sender": {"id": 9, "login": "ivan"},
                      "commits": [{"id": "c5", "author": {"name": "grace", "email": "grace@example.com", "username": "ivan"},
                                   "committer": {"name": "grace", "username": "ivan"}}],
                      "head_commit": {"id": "c5", "author": {"name": "grace", "username": "ivan"}}}')
  FROM push_provider;
SELECT is(wharf.erase_person('https://github.com', '{"logins": ["grace"]}'), 4::bigint,
          'GitHub push: four events name the person as a commit''s username');
SELECT is(pg_temp.remaining('pu_gh_'), ARRAY['pu_gh_keep_other_author'],
          'GitHub push: commits[].author.username, commits[].committer.username (any commit), '
          || 'head_commit.author.username and head_commit.committer.username; another username is kept');
SELECT is(wharf.erase_person('https://codeberg.org', '{"logins": ["grace"]}'), 4::bigint,
          'Forgejo push: four events name the person as a commit''s username');
SELECT is(pg_temp.remaining('pu_fj_'), ARRAY['pu_fj_keep_other_author'],
          'Forgejo push: commits[].author.username, commits[].committer.username (any commit), '
          || 'head_commit.author.username and head_commit.committer.username; another username is kept');
-- GitLab's person paths are its own: the push paths are not among them. Only
-- committer.username is tried here: a commit's author.username is matched by
-- GitLab's own author.username path (at any depth), as before.
SELECT pg_temp.push('pu_gl_keep_commit_committer', 'gitlab', 'https://gitlab.example.com',
                    '{"user_username": "ivan", "commits": [{"id": "c6", "committer": {"username": "grace"}}]}');
SELECT pg_temp.push('pu_gl_keep_head_committer', 'gitlab', 'https://gitlab.example.com',
                    '{"user_username": "ivan", "head_commit": {"id": "c6", "committer": {"username": "grace"}}}');
SELECT is(wharf.erase_person('https://gitlab.example.com', '{"logins": ["grace"]}'), 0::bigint,
          'GitLab: a commit''s committer.username, in commits[] or head_commit, does not name a person');
SELECT is(pg_temp.remaining('pu_gl_'), ARRAY['pu_gl_keep_commit_committer', 'pu_gl_keep_head_committer'],
          'GitLab: both pushes are kept');

-- GitLab: user, author, user_id, user_username.
SELECT pg_temp.event('gl_erase_user_id', 'gitlab', 'https://gitlab.example.com', '{"user": {"id": 42, "username": "erin"}}');
SELECT pg_temp.event('gl_erase_user_username', 'gitlab', 'https://gitlab.example.com', '{"user": {"id": 1, "username": "erin"}}');
SELECT pg_temp.event('gl_erase_author', 'gitlab', 'https://gitlab.example.com', '{"object_attributes": {"author": {"id": 42}}}');
SELECT pg_temp.event('gl_erase_user_id_field', 'gitlab', 'https://gitlab.example.com', '{"user_id": 42, "ref": "main"}');
SELECT pg_temp.event('gl_erase_user_username_field', 'gitlab', 'https://gitlab.example.com', '{"user_username": "erin"}', 'LEASED');
SELECT pg_temp.event('gl_keep_other', 'gitlab', 'https://gitlab.example.com', '{"user_id": 43, "project": {"id": 42}}');
SELECT is(wharf.erase_person('https://gitlab.example.com', '{"ids": ["42"]}'), 3::bigint,
          'GitLab: ids alone erase by user.id, author.id and user_id');
SELECT is(wharf.erase_person('https://gitlab.example.com', '{"logins": ["erin"]}'), 2::bigint,
          'GitLab: logins alone erase by user.username and user_username');
SELECT is(pg_temp.remaining('gl_'), ARRAY['gl_keep_other'], 'GitLab: a project id equal to the person id is not a person');

-- Slack: user (an id string, or an object with an id).
SELECT pg_temp.event('sl_erase_event_user', 'slack', 'https://slack.com', '{"event": {"type": "message", "user": "U07ABC"}}');
SELECT pg_temp.event('sl_erase_user_object', 'slack', 'https://slack.com', '{"user": {"id": "U07ABC", "name": "frank"}}', 'DONE');
SELECT pg_temp.event('sl_keep_other', 'slack', 'https://slack.com', '{"event": {"user": "U07XYZ", "text": "U07ABC"}}');
SELECT is(wharf.erase_person('https://slack.com', '{"ids": ["U07ABC"]}'), 2::bigint, 'Slack: two events name the user');
SELECT is(pg_temp.remaining('sl_'), ARRAY['sl_keep_other'], 'Slack: user as a string or an object; a mention in text is not a person path');

-- Outline: actorId and user.
SELECT pg_temp.event('ol_erase_actor', 'outline', 'https://docs.example.com', '{"actorId": "a1b2", "payload": {"id": "d1"}}');
SELECT pg_temp.event('ol_erase_user', 'outline', 'https://docs.example.com', '{"payload": {"model": {"user": {"id": "a1b2"}}}}', 'DEAD');
SELECT pg_temp.event('ol_erase_user_id_string', 'outline', 'https://docs.example.com', '{"payload": {"user": "a1b2"}}');
SELECT pg_temp.event('ol_keep_other', 'outline', 'https://docs.example.com', '{"actorId": "zz99", "payload": {"id": "a1b2"}}');
SELECT is(wharf.erase_person('https://docs.example.com', '{"ids": ["a1b2"]}'), 3::bigint, 'Outline: three events name the actor');
SELECT is(pg_temp.remaining('ol_'), ARRAY['ol_keep_other'], 'Outline: actorId and user; a document id equal to the person id is kept');

-- Paths belong to their provider: a GitLab path in a GitHub payload is not a person path there.
SELECT pg_temp.event('px_keep_gitlab_path_in_github', 'github', 'https://github.com', '{"user_username": "alice"}');
SELECT pg_temp.event('px_keep_github_path_in_slack', 'slack', 'https://github.com', '{"sender": {"login": "alice"}}');
SELECT is(wharf.erase_person('https://github.com', '{"logins": ["alice"]}'), 0::bigint,
          'each provider''s payloads are searched at that provider''s paths only');

-- Bad input.
SELECT throws_ok($$SELECT wharf.erase_person(NULL, '{"ids": ["1"]}')$$, '22004', NULL, 'a NULL source is an error');
SELECT throws_ok($$SELECT wharf.erase_person('https://github.com', NULL)$$, '22004', NULL, 'NULL identities are an error');
SELECT throws_ok($$SELECT wharf.erase_person('https://github.com', '["1"]')$$, '22023', NULL,
                 'identities that are not an object are an error');
SELECT throws_ok($$SELECT wharf.erase_person('https://github.com', '{"ids": "1"}')$$, '22023', NULL,
                 'ids that are not an array are an error');
SELECT throws_ok($$SELECT wharf.erase_person('https://github.com', '{"ids": [], "logins": []}')$$, '22023', NULL,
                 'no id and no login is an error (it would erase nothing silently)');
SELECT is(pg_temp.remaining('px_'), ARRAY['px_keep_github_path_in_slack', 'px_keep_gitlab_path_in_github'],
          'a rejected erasure deletes nothing');

SELECT * FROM finish();
ROLLBACK;
