-- now_ms is the server clock in Unix milliseconds, truncated like
-- time.Time.UnixMilli.
CREATE OR REPLACE FUNCTION __SCHEMA__.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS
$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
