-- Settings: the policy knobs of wharf.setting, read by every function and
-- changed by an operator without a deploy.

-- The value of an interval setting; raises 22023 for an unknown key.
CREATE OR REPLACE FUNCTION wharf.setting_interval(p_key text) RETURNS interval
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_value interval;
BEGIN
  SELECT value::interval INTO v_value FROM wharf.setting WHERE key = p_key AND type = 'interval';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown interval setting %', p_key USING ERRCODE = '22023';
  END IF;
  RETURN v_value;
END $$;

-- The value of an integer setting; raises 22023 for an unknown key.
CREATE OR REPLACE FUNCTION wharf.setting_integer(p_key text) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_value integer;
BEGIN
  SELECT value::integer INTO v_value FROM wharf.setting WHERE key = p_key AND type = 'integer';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown integer setting %', p_key USING ERRCODE = '22023';
  END IF;
  RETURN v_value;
END $$;

-- Changes one setting. Rejects an unknown key (22023), and a value that does
-- not parse as the key's type or is not positive (22023); changes nothing then.
CREATE OR REPLACE FUNCTION wharf.set_setting(p_key text, p_value text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_type text;
BEGIN
  IF p_key IS NULL OR p_value IS NULL THEN
    RAISE EXCEPTION 'wharf: set_setting needs a key and a value' USING ERRCODE = '22004';
  END IF;
  SELECT type INTO v_type FROM wharf.setting WHERE key = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wharf: unknown setting %', p_key USING ERRCODE = '22023';
  END IF;
  BEGIN
    IF v_type = 'interval' AND p_value::interval <= interval '0' THEN
      RAISE EXCEPTION USING ERRCODE = '22023';
    ELSIF v_type = 'integer' AND p_value::integer <= 0 THEN
      RAISE EXCEPTION USING ERRCODE = '22023';
    END IF;
  EXCEPTION WHEN data_exception THEN
    RAISE EXCEPTION 'wharf: setting % takes a positive %, not %', p_key, v_type, quote_literal(p_value)
      USING ERRCODE = '22023';
  END;
  UPDATE wharf.setting SET value = p_value WHERE key = p_key;
END $$;

-- The worker-side settings, in milliseconds. SECURITY DEFINER: the worker's
-- role needs EXECUTE on it, not read access to wharf.setting.
CREATE OR REPLACE FUNCTION wharf.worker_settings(OUT renew_every float8, OUT handler_timeout float8, OUT poll_every float8)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT extract(epoch FROM wharf.setting_interval('renew_every'))::float8 * 1000,
         extract(epoch FROM wharf.setting_interval('handler_timeout'))::float8 * 1000,
         extract(epoch FROM wharf.setting_interval('poll_every'))::float8 * 1000
$$;

REVOKE ALL ON FUNCTION wharf.worker_settings() FROM PUBLIC;
