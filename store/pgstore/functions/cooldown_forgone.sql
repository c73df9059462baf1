-- cooldown_forgone is bucket's cooldownForgone: the refill (amt
-- millitokens per per ms) a cooldown until p_until, started at p_now on a
-- bucket whose cooldown ends at p_old, forgoes; at most 2^50.
CREATE OR REPLACE FUNCTION __SCHEMA__.cooldown_forgone(amt bigint, per bigint, p_old bigint, p_now bigint, p_until bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR p_until <= greatest(p_now, p_old) THEN 0
            ELSE least(__SCHEMA__.ceil_mul_div(p_until - greatest(p_now, p_old), amt, per), 1125899906842624) END
$$;
