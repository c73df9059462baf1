-- release deletes a lease record and returns its concurrent costs, capped at
-- capacity, exactly once, into the buckets it was granted on only: an item
-- whose bucket was deleted (and perhaps re-created) restores nothing.
CREATE OR REPLACE FUNCTION __SCHEMA__.release(p_id uuid,
    OUT o_released boolean, OUT o_dims text[], OUT o_costs bigint[], OUT o_capped boolean[])
LANGUAGE plpgsql AS $$
DECLARE
    l record;
BEGIN
    DELETE FROM __SCHEMA__.leases WHERE id = p_id RETURNING dims, costs, incs INTO l;
    IF NOT FOUND THEN
        o_released := false;
        RETURN;
    END IF;
    o_released := true;
    PERFORM 1 FROM __SCHEMA__.buckets WHERE name = ANY (l.dims) ORDER BY name FOR UPDATE;
    SELECT array_agg(u.d ORDER BY u.o), array_agg(u.c ORDER BY u.o),
           array_agg(b.tokens + u.c * 1000 > b.capacity * 1000 ORDER BY u.o)
    INTO o_dims, o_costs, o_capped
    FROM unnest(l.dims, l.costs, l.incs) WITH ORDINALITY AS u(d, c, inc, o)
    JOIN __SCHEMA__.buckets b ON b.name = u.d AND b.incarnation = u.inc
    WHERE b.limit_type = 3;
    UPDATE __SCHEMA__.buckets b
    SET tokens = least(b.tokens + u.c * 1000, b.capacity * 1000), version = b.version + 1
    FROM unnest(l.dims, l.costs, l.incs) AS u(d, c, inc)
    WHERE b.name = u.d AND b.incarnation = u.inc AND b.limit_type = 3;
END $$;
