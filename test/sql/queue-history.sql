-- wharf.queue_history: per minute of the last hours, what was admitted,
-- handled and dead, the depth and the oldest waiting event's age, computed
-- from the inbox of one workspace only.
BEGIN;
SELECT plan(18);

SELECT wharf.upsert_workspace(1), wharf.upsert_workspace(2);
SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one');
SELECT wharf.upsert_connection(2, 'generic', 'https://hooks.example/2', 'webhook', 'two');

-- Workspace 1: 'old' has waited two hours (its arrival moved back: a fixture,
-- not a product path); a, b and c arrive now: a fails once and is handled
-- at its second attempt, b dies, c waits.
SELECT pg_temp.admit_event(1, 'repo:' || k, k) FROM unnest(ARRAY['old', 'a', 'b', 'c']) k;
UPDATE wharf.provider_event SET received_at = now() - interval '2 hours' WHERE delivery_key = 'old';
SELECT pg_temp.admit_event(2, 'repo:x', 'x');
CREATE TEMP TABLE lease AS SELECT id, lease_epoch, delivery_key FROM wharf.claim('w', 100)
 WHERE delivery_key IN ('a', 'b');
SELECT wharf.fail(id, lease_epoch, 'transient', 'TimeoutError') FROM lease WHERE delivery_key = 'a';
UPDATE wharf.provider_event SET next_attempt_at = clock_timestamp() WHERE delivery_key = 'a';
SELECT wharf.complete(id, lease_epoch) FROM wharf.claim('w', 100) WHERE delivery_key = 'a';
SELECT wharf.fail(id, lease_epoch, 'permanent', 'TypeError') FROM lease WHERE delivery_key = 'b';

CREATE TEMP TABLE clock AS SELECT date_trunc('minute', clock_timestamp()) AS minute_before;
CREATE TEMP TABLE history AS
  SELECT m.ordinality AS n, (m.value ->> 'at')::timestamptz AS at, (m.value ->> 'admitted')::int AS admitted,
         (m.value ->> 'handled')::int AS handled, (m.value ->> 'attempts')::int AS attempts, (m.value ->> 'dead')::int AS dead,
         (m.value ->> 'depth')::int AS depth, (m.value ->> 'oldest_age_seconds')::numeric AS oldest_age
    FROM jsonb_array_elements(wharf.queue_history(1, 1)) WITH ORDINALITY m;
ALTER TABLE clock ADD COLUMN minute_after timestamptz;
UPDATE clock SET minute_after = date_trunc('minute', clock_timestamp());

SELECT is((SELECT count(*) FROM history), 60::bigint, 'one hour is sixty minutes');
SELECT ok((SELECT max(at) FROM history) IN ((SELECT minute_before FROM clock), (SELECT minute_after FROM clock)),
          'ending with the current minute');
SELECT ok((SELECT bool_and(at = lag_at + interval '1 minute')
             FROM (SELECT at, lag(at) OVER (ORDER BY n) AS lag_at FROM history) h WHERE lag_at IS NOT NULL),
          'oldest first, one row per minute');
SELECT is((SELECT sum(admitted) FROM history), 3::bigint, 'three admitted in the window (old arrived before it)');
SELECT is((SELECT sum(handled) FROM history), 1::bigint, 'one handled');
SELECT is((SELECT sum(attempts) FROM history), 2::bigint, 'in two attempts: two attempts per handled event');
SELECT is((SELECT sum(dead) FROM history), 1::bigint, 'one dead');
SELECT is((SELECT depth FROM history ORDER BY n DESC LIMIT 1), 2, 'now old and c wait');
SELECT is((SELECT depth FROM history ORDER BY n LIMIT 1), 1, 'at the start of the window only old waited');
SELECT ok((SELECT oldest_age FROM history ORDER BY n DESC LIMIT 1) >= 7200,
          'the oldest waiting event has waited two hours now');
-- Exactly, not within a range: the window ends with the minute queue_history
-- ran in, which may be a minute after the one this transaction started in.
SELECT is((SELECT oldest_age FROM history ORDER BY n LIMIT 1),
          (SELECT round(extract(epoch FROM (SELECT min(at) + interval '1 minute' FROM history) - received_at)::numeric, 3)
             FROM wharf.provider_event WHERE delivery_key = 'old'),
          'and at the end of the first minute, as long as it had waited then (about an hour)');
SELECT ok((SELECT oldest_age FROM history ORDER BY n LIMIT 1) BETWEEN 3600 AND 3780,
          'which is an hour and one or two minutes');

SELECT is((SELECT sum((m ->> 'admitted')::int) FROM jsonb_array_elements(wharf.queue_history(2, 24)) m), 1::bigint,
          'workspace 2 sees only its own event');

-- A dead letter received two hours ago and replayed now waits from its replay.
SELECT pg_temp.admit_event(2, 'repo:y', 'y');
UPDATE wharf.provider_event SET received_at = now() - interval '2 hours' WHERE delivery_key = 'y';
SELECT wharf.fail(id, lease_epoch, 'permanent', 'TypeError') FROM wharf.claim('w', 100) WHERE delivery_key = 'y';
SELECT ok(wharf.replay(2, pg_temp.id('y'), 'ops'), 'y is replayed');
SELECT ok((SELECT bool_and((m ->> 'depth')::int = 0)
             FROM jsonb_array_elements(wharf.queue_history(2, 1)) m WHERE (m ->> 'at')::timestamptz < date_trunc('minute', now())),
          'before this minute nothing waited: y was DEAD, not waiting, and x had not arrived');
SELECT ok((SELECT max((m ->> 'oldest_age_seconds')::numeric) FROM jsonb_array_elements(wharf.queue_history(2, 1)) m) < 3600,
          'and no minute shows y waiting since its arrival two hours ago');
SELECT throws_ok($$SELECT wharf.queue_history(1, 25)$$, '22023', NULL, 'more than 24 hours is 22023');
SELECT throws_ok($$SELECT wharf.queue_history(404, 1)$$, 'P0002', NULL, 'an unknown workspace is P0002');

SELECT * FROM finish();
ROLLBACK;
