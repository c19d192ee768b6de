-- Person erasure: delete every event of a source whose payload names a
-- person, in every state, with its steps. A handler still holding such an
-- event finds it gone at its next fence (WH410) and stops writing.

-- The places where each provider's payloads name a person, as jsonpath
-- queries and whether they hold an id or a login. All are at any depth but
-- GitHub's and Forgejo's push paths, commits[] and head_commit
-- author/committer.username (logins), which are at the payload's root.
CREATE OR REPLACE FUNCTION wharf.person_paths(p_provider text)
RETURNS TABLE (path jsonpath, holds text)
LANGUAGE sql IMMUTABLE AS $$
  SELECT ('lax $.**.' || k.key || '.' || f.field)::jsonpath, f.holds
    FROM unnest(ARRAY['sender', 'user', 'author', 'committer', 'assignee', 'member']) AS k(key),
         (VALUES ('id', 'id'), ('login', 'login')) AS f(field, holds)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  -- Push events: a commit's author and committer carry the login as username.
  -- Anchored at the root, where push payloads hold them: one walk over the
  -- commits, not another over the whole payload.
  SELECT p.path::jsonpath, 'login'
    FROM (VALUES ('lax $.commits[*].author.username'), ('lax $.commits[*].committer.username'),
                 ('lax $.head_commit.author.username'), ('lax $.head_commit.committer.username'))
         AS p(path)
   WHERE p_provider IN ('github', 'forgejo')
  UNION ALL
  SELECT p.path::jsonpath, p.holds
    FROM (VALUES ('gitlab', 'lax $.**.user.id', 'id'), ('gitlab', 'lax $.**.user.username', 'login'),
                 ('gitlab', 'lax $.**.author.id', 'id'), ('gitlab', 'lax $.**.author.username', 'login'),
                 ('gitlab', 'lax $.**.user_id', 'id'), ('gitlab', 'lax $.**.user_username', 'login'),
                 ('slack', 'lax $.**.user', 'id'), ('slack', 'lax $.**.user.id', 'id'),
                 ('outline', 'lax $.**.actorId', 'id'), ('outline', 'lax $.**.user', 'id'),
                 ('outline', 'lax $.**.user.id', 'id'))
         AS p(provider, path, holds)
   WHERE p.provider = p_provider
$$;

-- True when p_payload of provider p_provider names one of the ids or logins
-- (compared as text) at one of the provider's person paths (wharf.person_paths;
-- for GitHub and Forgejo, the push commits' author/committer username among
-- them, in commits[] and head_commit).
CREATE OR REPLACE FUNCTION wharf.payload_names_person(
  p_provider text, p_payload jsonb, p_ids text[], p_logins text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT EXISTS (
    SELECT FROM wharf.person_paths(p_provider) pp,
           LATERAL jsonb_path_query(p_payload, pp.path) v
     WHERE jsonb_typeof(v) IN ('string', 'number')
       AND (v #>> '{}') = ANY (CASE pp.holds WHEN 'id' THEN p_ids ELSE p_logins END))
$$;

-- Deletes the events of p_source (installation rows included, every state,
-- LEASED too) whose payload names the person p_identities =
-- {"ids": [...], "logins": [...]} at its provider's person paths (for GitHub
-- and Forgejo push events, logins also match commits[] and head_commit
-- author/committer.username), with their steps. Returns how many.
-- Raises 22004 for a NULL argument, 22023 for malformed identities or none.
CREATE OR REPLACE FUNCTION wharf.erase_person(p_source text, p_identities jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_ids     text[];
  v_logins  text[];
  v_events  bigint[];
  v_deleted bigint;
BEGIN
  IF p_source IS NULL OR p_identities IS NULL THEN
    RAISE EXCEPTION 'wharf.erase_person: source and identities are required' USING ERRCODE = '22004';
  END IF;
  IF jsonb_typeof(p_identities) <> 'object'
     OR jsonb_typeof(coalesce(p_identities->'ids', '[]')) <> 'array'
     OR jsonb_typeof(coalesce(p_identities->'logins', '[]')) <> 'array' THEN
    RAISE EXCEPTION 'wharf.erase_person: identities must be {"ids": [...], "logins": [...]}'
      USING ERRCODE = '22023';
  END IF;
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_ids
    FROM jsonb_array_elements(coalesce(p_identities->'ids', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  SELECT coalesce(array_agg(v #>> '{}'), '{}') INTO v_logins
    FROM jsonb_array_elements(coalesce(p_identities->'logins', '[]')) v
   WHERE jsonb_typeof(v) IN ('string', 'number');
  IF cardinality(v_ids) + cardinality(v_logins) = 0 THEN
    RAISE EXCEPTION 'wharf.erase_person: name at least one id or login' USING ERRCODE = '22023';
  END IF;

  -- Lock the events, then their scopes, then delete: the same order as every
  -- state change (event row, then its scope through the trigger). Deleting at
  -- once would lock the scopes in scan order at the end of the DELETE, while
  -- a redelivery that holds one of them waits for the deleted row (ON
  -- CONFLICT): a deadlock. Locked but not yet deleted, a row is simply a
  -- duplicate to that redelivery.
  SELECT coalesce(array_agg(id), '{}') INTO v_events
    FROM (SELECT e.id FROM wharf.provider_event e
           WHERE e.source = p_source
             AND wharf.payload_names_person(e.provider, e.payload, v_ids, v_logins)
           ORDER BY e.id
             FOR UPDATE) matched;
  PERFORM wharf.lock_scopes(ARRAY(SELECT e.scope_key FROM wharf.provider_event e WHERE e.id = ANY (v_events)));

  DELETE FROM wharf.provider_event WHERE id = ANY (v_events);
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  RETURN v_deleted;
END $$;
