-- wharf.setting, setting_interval/integer and set_setting.
BEGIN;
SELECT plan(10);

SELECT is(wharf.setting_interval('lease'), interval '2 minutes', 'lease defaults to 2 minutes');
SELECT is(wharf.setting_integer('max_attempts'), 10, 'max_attempts defaults to 10');
SELECT results_eq(
  $$SELECT key, value FROM wharf.setting ORDER BY key$$,
  $$VALUES ('base_delay', '2 seconds'), ('dead_retention', '30 days'), ('handler_timeout', '30 minutes'),
           ('lease', '2 minutes'), ('max_attempts', '10'), ('max_delay', '5 minutes'),
           ('poll_every', '5 seconds'), ('renew_every', '30 seconds'), ('replay_window', '3 days')$$,
  'every setting of the contract has its default');

SELECT lives_ok($$SELECT wharf.set_setting('lease', '45 seconds')$$, 'an interval setting takes an interval');
SELECT is(wharf.setting_interval('lease'), interval '45 seconds', 'the new value is read back');
SELECT throws_ok($$SELECT wharf.set_setting('leese', '1 minute')$$, '22023', NULL, 'an unknown key is rejected');
SELECT throws_ok($$SELECT wharf.set_setting('lease', 'soon')$$, '22023', NULL, 'a value that is no interval is rejected');
SELECT throws_ok($$SELECT wharf.set_setting('max_attempts', '2.5')$$, '22023', NULL, 'a value that is no integer is rejected');
SELECT throws_ok($$SELECT wharf.set_setting('max_attempts', NULL)$$, '22004', NULL, 'NULL is rejected');
SELECT is(wharf.setting_integer('max_attempts'), 10, 'a rejected change leaves the old value');

SELECT * FROM finish();
ROLLBACK;
