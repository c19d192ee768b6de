-- wharf.setting, setting_interval/integer, set_setting and worker_settings.
BEGIN;
SELECT plan(16);

SELECT is(wharf.setting_interval('lease'), interval '2 minutes', 'lease defaults to 2 minutes');
SELECT is(wharf.setting_integer('max_attempts'), 10, 'max_attempts defaults to 10');
SELECT results_eq(
  $$SELECT key, value FROM wharf.setting ORDER BY key$$,
  $$VALUES ('audit_retention', '365 days'), ('base_delay', '2 seconds'), ('dead_retention', '30 days'),
           ('handler_timeout', '30 minutes'), ('issue_limit', '1000'), ('issue_retention', '30 days'),
           ('lease', '2 minutes'), ('log_retention', '30 days'),
           ('max_attempts', '10'), ('max_delay', '5 minutes'),
           ('poll_every', '5 seconds'), ('purge_batch', '5000'), ('renew_every', '30 seconds'),
           ('replay_window', '3 days'), ('secret_overlap', '1 day'), ('stuck_after', '15 minutes'),
           ('transient_max_age', '24 hours')$$,
  'every setting of the contract has its default');
SELECT is(wharf.setting_interval('secret_overlap'), interval '1 day', 'secret_overlap is an interval setting of 1 day');

SELECT lives_ok($$SELECT wharf.set_setting('lease', '45 seconds')$$, 'an interval setting takes an interval');
SELECT is(wharf.setting_interval('lease'), interval '45 seconds', 'the new value is read back');
SELECT throws_ok($$SELECT wharf.set_setting('leese', '1 minute')$$, '22023', NULL, 'an unknown key is rejected');
SELECT throws_ok($$SELECT wharf.set_setting('lease', 'soon')$$, '22023', NULL, 'a value that is no interval is rejected');
SELECT throws_ok($$SELECT wharf.set_setting('max_attempts', '2.5')$$, '22023', NULL, 'a value that is no integer is rejected');
SELECT throws_ok($$SELECT wharf.set_setting('max_attempts', NULL)$$, '22004', NULL, 'NULL is rejected');
SELECT is(wharf.setting_integer('max_attempts'), 10, 'a rejected change leaves the old value');

-- worker_settings: the worker-side settings in milliseconds -------------------------
SELECT results_eq(
  $$SELECT renew_every, handler_timeout, poll_every FROM wharf.worker_settings()$$,
  $$VALUES (30000::float8, 1800000::float8, 5000::float8)$$,
  'worker_settings returns renew_every, handler_timeout and poll_every in milliseconds');
SELECT wharf.set_setting('poll_every', '1.5 seconds');
SELECT wharf.set_setting('handler_timeout', '1 hour');
SELECT results_eq(
  $$SELECT renew_every, handler_timeout, poll_every FROM wharf.worker_settings()$$,
  $$VALUES (30000::float8, 3600000::float8, 1500::float8)$$,
  'worker_settings reads the current values, fractions of a second included');
SELECT function_privs_are('wharf', 'worker_settings', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC has no EXECUTE on worker_settings');
SELECT is_definer('wharf', 'worker_settings', ARRAY[]::text[],
                  'worker_settings is SECURITY DEFINER (the worker needs EXECUTE only, not wharf.setting)');
SELECT is((SELECT proconfig FROM pg_proc WHERE oid = 'wharf.worker_settings()'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp'], 'worker_settings pins search_path to pg_catalog, pg_temp');

SELECT * FROM finish();
ROLLBACK;
