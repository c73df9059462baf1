-- reserved_debt is bucket.ReservedDebt: what pending reservations may still
-- owe at now, in millitokens.
CREATE OR REPLACE FUNCTION __SCHEMA__.reserved_debt(amt bigint, per bigint, reserved bigint, now bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR reserved <= now THEN 0
            ELSE least(__SCHEMA__.ceil_mul_div(reserved - now, amt, per), 1000000000000000) END
$$;
