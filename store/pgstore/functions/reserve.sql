-- reserve debits every requests or tokens dimension or none, even when a
-- balance is short (bucket.Reserve), provided the reservation is valid
-- within p_max_wait ms: o_valid is the latest instant at which each
-- item's balance would have covered it, cooldowns included; o_wait runs
-- to it from the decision time. o_err: 'unknown', 'concurrent' (o_dim is a
-- concurrent dimension), 'cost', 'inuse'; nothing changed then. A wait
-- longer than p_max_wait, or a balance that would fall below
-- bucket.MinBalance (then o_wait is the wait until it would not), is a
-- denial that writes nothing. A caller more than p_skew behind a refill
-- timestamp is refused (see skew_refusal) after the check for a retry of
-- a recorded reservation. With p_record a lease record with valid_ms is
-- written, expiring at o_valid + p_ttl; a retry with the same id and items
-- is answered as what its record says.
CREATE OR REPLACE FUNCTION __SCHEMA__.reserve(
    p_dims text[], p_costs bigint[], p_now bigint, p_ttl bigint, p_id uuid,
    p_caller text, p_record boolean, p_max_wait bigint, p_skew bigint,
    OUT o_err text, OUT o_dim text, OUT o_granted boolean, OUT o_recorded boolean,
    OUT o_now bigint, OUT o_wait bigint, OUT o_valid bigint, OUT o_expires bigint,
    OUT o_types smallint[], OUT o_costs bigint[], OUT o_caps bigint[], OUT o_remaining bigint[], OUT o_waits bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    n int := cardinality(p_dims);
    b record;
    l record;
    i int;
    c bigint;
    x bigint[];
    al bigint[];
    w bigint;
    amts bigint[] := array_fill(0::bigint, ARRAY[n]);
    pers bigint[] := array_fill(0::bigint, ARRAY[n]);
    toks bigint[] := array_fill(0::bigint, ARRAY[n]);
    lasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    untils bigint[] := array_fill(0::bigint, ARRAY[n]);
    reserveds bigint[] := array_fill(0::bigint, ARRAY[n]);
    alasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    ats bigint[] := array_fill(0::bigint, ARRAY[n]);
    ntoks bigint[] := array_fill(0::bigint, ARRAY[n]);
    nlasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    nres bigint[] := array_fill(0::bigint, ARRAY[n]);
    v_incs bigint[] := array_fill(0::bigint, ARRAY[n]);
    too_long boolean := false;
    bound bigint := 0;
    min_balance CONSTANT bigint := -1000000000000000; -- bucket.MinBalance
    v_lag bigint;
BEGIN
    o_types := array_fill(0::smallint, ARRAY[n]);
    o_costs := array_fill(0::bigint, ARRAY[n]);
    o_caps := array_fill(0::bigint, ARRAY[n]);
    o_remaining := array_fill(0::bigint, ARRAY[n]);
    o_waits := array_fill(0::bigint, ARRAY[n]);
    o_granted := false; o_recorded := false;
    FOR b IN SELECT * FROM __SCHEMA__.buckets WHERE name = ANY (p_dims) ORDER BY name FOR UPDATE LOOP
        i := array_position(p_dims, b.name);
        o_types[i] := b.limit_type;
        o_caps[i] := b.capacity;
        o_costs[i] := CASE WHEN p_costs[i] <> 0 THEN p_costs[i] WHEN b.cost_per_call = 0 THEN 1 ELSE b.cost_per_call END;
        amts[i] := b.refill_amount * 1000;
        pers[i] := b.refill_period_ms;
        toks[i] := b.tokens;
        lasts[i] := b.last_refill_ms;
        untils[i] := b.cooldown_until_ms;
        reserveds[i] := b.reserved_until_ms;
        v_incs[i] := b.incarnation;
    END LOOP;
    FOR i IN 1..n LOOP
        IF o_types[i] = 0 THEN
            o_err := 'unknown'; o_dim := p_dims[i];
            RETURN;
        END IF;
    END LOOP;
    FOR i IN 1..n LOOP
        IF o_types[i] = 3 THEN
            o_err := 'concurrent'; o_dim := p_dims[i];
            RETURN;
        END IF;
        IF o_costs[i] > o_caps[i] THEN
            o_err := 'cost'; o_dim := p_dims[i];
            RETURN;
        END IF;
    END LOOP;
    o_now := coalesce(p_now, __SCHEMA__.now_ms());
    FOR i IN 1..n LOOP
        al := __SCHEMA__.align(amts[i], lasts[i], o_now, p_skew);
        alasts[i] := al[1]; ats[i] := al[2];
    END LOOP;
    SELECT dims, costs, created_ms, expires_ms, valid_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM unnest(amts, lasts) AS u(a, la) WHERE u.a > 0 AND u.la - o_now > p_skew) THEN
            -- Too far behind a refill timestamp: refused, nothing changes.
            SELECT * INTO v_lag, o_wait, o_remaining, o_waits
            FROM __SCHEMA__.skew_refusal((SELECT array_agg(u.cv * 1000 ORDER BY u.k) FROM unnest(o_caps) WITH ORDINALITY AS u(cv, k)),
                                         amts, pers, toks, lasts, untils,
                                         (SELECT array_agg(u.cv * 1000 ORDER BY u.k) FROM unnest(o_costs) WITH ORDINALITY AS u(cv, k)),
                                         o_now, p_skew);
            o_expires := v_lag;
            RETURN;
        END IF;
        o_valid := o_now;
        FOR i IN 1..n LOOP
            c := o_costs[i] * 1000;
            w := __SCHEMA__.retry_in(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], untils[i], ats[i], c);
            o_waits[i] := w;
            too_long := too_long OR w > p_max_wait;
            o_valid := greatest(o_valid, ats[i] + w);
            o_remaining[i] := (__SCHEMA__.refill(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], untils[i], ats[i]))[1];
        END LOOP;
        o_wait := o_valid - o_now;
        IF NOT too_long THEN
            FOR i IN 1..n LOOP
                c := o_costs[i] * 1000;
                x := __SCHEMA__.reserve_tokens(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], untils[i],
                                               reserveds[i], ats[i], c, o_valid);
                IF x IS NULL THEN
                    -- bucket.ReserveBound
                    bound := greatest(bound, __SCHEMA__.retry_in(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i],
                                                                 untils[i], ats[i], c + min_balance), 1);
                ELSE
                    ntoks[i] := x[1]; nlasts[i] := x[2]; nres[i] := x[3];
                END IF;
            END LOOP;
            IF bound > 0 THEN
                too_long := true; o_wait := bound;
            END IF;
        END IF;
        IF too_long THEN
            o_valid := NULL;
            RETURN;
        END IF;
        o_expires := o_valid + p_ttl;
        IF p_record THEN
            INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs, incs, valid_ms)
            VALUES (p_id, p_caller, o_now, o_expires, p_dims, o_costs, v_incs, o_valid)
            ON CONFLICT (id) DO NOTHING;
            o_recorded := FOUND;
            IF NOT FOUND THEN
                -- A concurrent request with the same id committed first.
                SELECT dims, costs, created_ms, expires_ms, valid_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
            END IF;
        END IF;
        IF o_recorded OR NOT p_record THEN
            o_granted := true;
            o_remaining := ntoks;
            UPDATE __SCHEMA__.buckets bk SET tokens = u.t, last_refill_ms = u.l, reserved_until_ms = u.r,
                version = bk.version + 1
            FROM unnest(p_dims, ntoks, nlasts, nres) AS u(d, t, l, r) WHERE bk.name = u.d;
            RETURN;
        END IF;
    END IF;
    -- The id has a record: the reservation (or grant) it was, or 'inuse'.
    SELECT * INTO o_err, o_granted, o_recorded, w, o_remaining, o_expires
    FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps, amts, pers, toks, alasts, untils, ats);
    IF o_err IS NULL THEN
        o_valid := greatest(l.valid_ms, l.created_ms);
        o_wait := greatest(l.valid_ms - o_now, 0);
        o_waits := array_fill(0::bigint, ARRAY[n]);
    END IF;
END $$;
