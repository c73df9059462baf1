-- forget_reserved is bucket's forgetReserved: the latest valid instant to
-- keep when a reset or a change of limits forgives pending reservations.
CREATE OR REPLACE FUNCTION __SCHEMA__.forget_reserved(cap bigint, amt bigint, per bigint, reserved bigint, now bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN reserved <= now OR amt <= 0 THEN reserved
            ELSE least(reserved + __SCHEMA__.ceil_mul_div(cap, per, amt), 9007199254740991) END
$$;
