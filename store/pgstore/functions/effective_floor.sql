-- effective_floor is bucket.EffectiveFloor: the floor fl lowered by what
-- reservations owe, never below bucket.MinBalance.
CREATE OR REPLACE FUNCTION __SCHEMA__.effective_floor(fl bigint, amt bigint, per bigint, reserved bigint, now bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT greatest(fl - __SCHEMA__.reserved_debt(amt, per, reserved, now), -1000000000000000)
$$;
