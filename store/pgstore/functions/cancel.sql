-- cancel gives a reservation's tokens back (bucket.Unreserve on each
-- requests or tokens item, at the aligned time). A recorded reservation
-- (p_recorded) is read from its record, which is deleted (o_cancelled;
-- o_err 'notres' when the record is a lease granted by an acquisition,
-- nothing changed then), and gives back only into the buckets it was made
-- on (same incarnation); otherwise p_dims, p_costs (tokens the lease holds)
-- and p_valid describe it, and o_cancelled says it was still pending.
-- o_dims and o_amounts list what went back (millitokens), in the
-- reservation's order. The lease row is locked before the bucket rows.
CREATE OR REPLACE FUNCTION __SCHEMA__.cancel(p_id uuid, p_recorded boolean, p_dims text[], p_costs bigint[], p_valid bigint,
    p_now bigint, p_skew bigint,
    OUT o_err text, OUT o_cancelled boolean, OUT o_dims text[], OUT o_amounts bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    l record;
    b record;
    k int;
    v_now bigint;
    v_valid bigint := p_valid;
    v_dims text[] := p_dims;
    v_costs bigint[] := p_costs;
    v_incs bigint[];
    al bigint[];
    x bigint[];
BEGIN
    o_cancelled := false; o_dims := '{}'; o_amounts := '{}';
    IF p_recorded THEN
        SELECT dims, costs, incs, valid_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        IF l.valid_ms = 0 THEN
            o_err := 'notres';
            RETURN;
        END IF;
        DELETE FROM __SCHEMA__.leases WHERE id = p_id;
        o_cancelled := true;
        v_dims := l.dims; v_costs := l.costs; v_incs := l.incs; v_valid := l.valid_ms;
    END IF;
    PERFORM 1 FROM __SCHEMA__.buckets WHERE name = ANY (v_dims) ORDER BY name FOR UPDATE;
    v_now := coalesce(p_now, __SCHEMA__.now_ms());
    IF NOT p_recorded THEN
        o_cancelled := v_now < v_valid;
    END IF;
    FOR k IN 1..coalesce(cardinality(v_dims), 0) LOOP
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = v_dims[k];
        IF NOT FOUND OR b.limit_type = 3 OR (p_recorded AND b.incarnation <> v_incs[k]) THEN
            CONTINUE;
        END IF;
        al := __SCHEMA__.align(b.refill_amount * 1000, b.last_refill_ms, v_now, p_skew);
        x := __SCHEMA__.unreserve_tokens(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1],
                                         b.cooldown_until_ms, b.reserved_until_ms, al[2], v_costs[k] * 1000, v_valid);
        IF x[1] <> b.tokens OR x[2] <> b.last_refill_ms THEN
            UPDATE __SCHEMA__.buckets SET tokens = x[1], last_refill_ms = x[2], version = version + 1 WHERE name = v_dims[k];
        END IF;
        IF x[3] > 0 THEN
            o_dims := o_dims || v_dims[k];
            o_amounts := o_amounts || x[3];
        END IF;
    END LOOP;
END $$;
