-- floor_milli is bucket.Limits.Floor: the lowest balance Adjust may reach.
CREATE OR REPLACE FUNCTION __SCHEMA__.floor_milli(limit_type smallint, capacity bigint, max_debt bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN limit_type = 3 OR max_debt = -1 THEN 0
            WHEN max_debt = 0 THEN -capacity * 1000
            ELSE -max_debt * 1000 END
$$;
