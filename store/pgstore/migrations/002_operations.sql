-- Sluice PostgreSQL store, version 2: one function per operation. Every
-- function that touches several buckets locks them in name order
-- (ORDER BY name FOR UPDATE; the column's collation is "C"), and lease rows
-- are always locked before bucket rows, so operations never deadlock.
-- p_now NULL means the server clock, read after the locks are held.

-- acquire debits every dimension or none (store.Store.Acquire). On an error
-- o_err is 'unknown' (o_dim has no bucket), 'cost' (o_dim's cost, in
-- o_costs[i], exceeds its capacity) or 'dup' (the lease id is in use), and
-- nothing changed.
CREATE FUNCTION __SCHEMA__.acquire(
    p_dims text[], p_costs bigint[], p_now bigint, p_ttl bigint, p_id uuid,
    p_caller text, p_record boolean, p_poll bigint,
    OUT o_err text, OUT o_dim text, OUT o_granted boolean, OUT o_recorded boolean,
    OUT o_now bigint, OUT o_retry bigint, OUT o_types smallint[], OUT o_costs bigint[],
    OUT o_caps bigint[], OUT o_remaining bigint[], OUT o_waits bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    n int := cardinality(p_dims);
    b record;
    i int;
    c bigint;
    r bigint[];
    w bigint;
    amts bigint[] := array_fill(0::bigint, ARRAY[n]);
    pers bigint[] := array_fill(0::bigint, ARRAY[n]);
    toks bigint[] := array_fill(0::bigint, ARRAY[n]);
    lasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    ntoks bigint[] := array_fill(0::bigint, ARRAY[n]);
    nlasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    avail bigint[] := array_fill(0::bigint, ARRAY[n]);
    conc boolean := false;
    v_type smallint;
    v_cap bigint;
    v_amt bigint;
    v_per bigint;
    v_tok bigint;
    v_last bigint;
    a bigint;
BEGIN
    IF n = 1 THEN
        -- The common case, with scalars only: one bucket, bucket.Take inline.
        SELECT bk.limit_type, bk.capacity, bk.refill_amount * 1000, bk.refill_period_ms,
               CASE WHEN p_costs[1] <> 0 THEN p_costs[1] WHEN bk.cost_per_call = 0 THEN 1 ELSE bk.cost_per_call END,
               bk.tokens, bk.last_refill_ms
        INTO v_type, v_cap, v_amt, v_per, c, v_tok, v_last
        FROM __SCHEMA__.buckets bk WHERE bk.name = p_dims[1] FOR UPDATE;
        IF NOT FOUND THEN
            o_err := 'unknown'; o_dim := p_dims[1];
            RETURN;
        END IF;
        o_types := ARRAY[v_type]; o_costs := ARRAY[c]; o_caps := ARRAY[v_cap];
        IF c > v_cap THEN
            o_err := 'cost'; o_dim := p_dims[1];
            RETURN;
        END IF;
        o_now := coalesce(p_now, __SCHEMA__.now_ms());
        -- bucket.Refill
        IF v_amt > 0 AND o_now > v_last THEN
            IF v_tok >= v_cap * 1000 OR NOT __SCHEMA__.prod_less(o_now - v_last, v_amt, v_cap * 1000 - v_tok, v_per) THEN
                toks[1] := v_cap * 1000; lasts[1] := o_now;
            ELSE
                a := __SCHEMA__.mul_div(o_now - v_last, v_amt, v_per);
                IF a = 0 THEN
                    toks[1] := v_tok; lasts[1] := v_last;
                ELSE
                    toks[1] := v_tok + a; lasts[1] := v_last + __SCHEMA__.ceil_mul_div(a, v_per, v_amt);
                END IF;
            END IF;
        ELSE
            toks[1] := v_tok; lasts[1] := v_last;
        END IF;
        IF toks[1] < c * 1000 THEN
            o_granted := false; o_recorded := false;
            IF v_type = 3 THEN
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases WHERE dims @> p_dims;
                w := greatest(CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END, 1);
            ELSE
                w := __SCHEMA__.retry_in(v_cap * 1000, v_amt, v_per, v_tok, v_last, o_now, c * 1000);
            END IF;
            o_retry := w; o_waits := ARRAY[w]; o_remaining := ARRAY[toks[1]];
            RETURN;
        END IF;
        o_granted := true; o_retry := 0; o_waits := ARRAY[0::bigint];
        o_remaining := ARRAY[toks[1] - c * 1000];
        o_recorded := p_record OR v_type = 3;
        IF o_recorded THEN
            INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs)
            VALUES (p_id, p_caller, o_now, o_now + p_ttl, p_dims, o_costs)
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                o_err := 'dup'; o_granted := false; o_recorded := false;
                RETURN;
            END IF;
        END IF;
        UPDATE __SCHEMA__.buckets SET tokens = toks[1] - c * 1000, last_refill_ms = lasts[1], version = version + 1
        WHERE name = p_dims[1];
        RETURN;
    END IF;
    o_types := array_fill(0::smallint, ARRAY[n]);
    o_costs := array_fill(0::bigint, ARRAY[n]);
    o_caps := array_fill(0::bigint, ARRAY[n]);
    o_remaining := array_fill(0::bigint, ARRAY[n]);
    o_waits := array_fill(0::bigint, ARRAY[n]);
    FOR b IN SELECT * FROM __SCHEMA__.buckets WHERE name = ANY (p_dims) ORDER BY name FOR UPDATE LOOP
        i := CASE WHEN n = 1 THEN 1 ELSE array_position(p_dims, b.name) END;
        o_types[i] := b.limit_type;
        o_caps[i] := b.capacity;
        o_costs[i] := CASE WHEN p_costs[i] <> 0 THEN p_costs[i] WHEN b.cost_per_call = 0 THEN 1 ELSE b.cost_per_call END;
        amts[i] := b.refill_amount * 1000;
        pers[i] := b.refill_period_ms;
        toks[i] := b.tokens;
        lasts[i] := b.last_refill_ms;
    END LOOP;
    FOR i IN 1..n LOOP
        IF o_types[i] = 0 THEN
            o_err := 'unknown'; o_dim := p_dims[i];
            RETURN;
        END IF;
    END LOOP;
    FOR i IN 1..n LOOP
        IF o_costs[i] > o_caps[i] THEN
            o_err := 'cost'; o_dim := p_dims[i];
            RETURN;
        END IF;
        IF o_types[i] = 3 THEN
            conc := true;
        END IF;
    END LOOP;
    o_now := coalesce(p_now, __SCHEMA__.now_ms());
    o_granted := true;
    o_retry := 0;
    FOR i IN 1..n LOOP
        c := o_costs[i] * 1000;
        r := __SCHEMA__.refill(o_caps[i] * 1000, amts[i], pers[i], toks[i], lasts[i], o_now);
        avail[i] := r[1];
        IF r[1] >= c THEN
            ntoks[i] := r[1] - c;
            nlasts[i] := r[2];
            o_remaining[i] := r[1] - c;
        ELSE
            o_granted := false;
            IF o_types[i] = 3 THEN
                -- bucket.ConcurrentRetry over this dimension's earliest expiry.
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases WHERE dims @> ARRAY[p_dims[i]];
                w := CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END;
                w := greatest(w, 1);
            ELSE
                w := __SCHEMA__.retry_in(o_caps[i] * 1000, amts[i], pers[i], toks[i], lasts[i], o_now, c);
            END IF;
            o_waits[i] := w;
            o_retry := greatest(o_retry, w);
        END IF;
    END LOOP;
    o_recorded := false;
    IF NOT o_granted THEN
        o_remaining := avail;
        RETURN;
    END IF;
    IF p_record OR conc THEN
        INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs)
        VALUES (p_id, p_caller, o_now, o_now + p_ttl, p_dims, o_costs)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            o_err := 'dup'; o_granted := false;
            RETURN;
        END IF;
        o_recorded := true;
    END IF;
    UPDATE __SCHEMA__.buckets bk SET tokens = u.t, last_refill_ms = u.l, version = bk.version + 1
    FROM unnest(p_dims, ntoks, nlasts) AS u(d, t, l) WHERE bk.name = u.d;
END $$;

-- release deletes a lease record and returns its concurrent costs, capped at
-- capacity, exactly once.
CREATE FUNCTION __SCHEMA__.release(p_id uuid,
    OUT o_released boolean, OUT o_dims text[], OUT o_costs bigint[], OUT o_capped boolean[])
LANGUAGE plpgsql AS $$
DECLARE
    l record;
BEGIN
    DELETE FROM __SCHEMA__.leases WHERE id = p_id RETURNING dims, costs INTO l;
    IF NOT FOUND THEN
        o_released := false;
        RETURN;
    END IF;
    o_released := true;
    PERFORM 1 FROM __SCHEMA__.buckets WHERE name = ANY (l.dims) ORDER BY name FOR UPDATE;
    SELECT array_agg(u.d ORDER BY u.o), array_agg(u.c ORDER BY u.o),
           array_agg(b.tokens + u.c * 1000 > b.capacity * 1000 ORDER BY u.o)
    INTO o_dims, o_costs, o_capped
    FROM unnest(l.dims, l.costs) WITH ORDINALITY AS u(d, c, o)
    JOIN __SCHEMA__.buckets b ON b.name = u.d
    WHERE b.limit_type = 3;
    UPDATE __SCHEMA__.buckets b
    SET tokens = least(b.tokens + u.c * 1000, b.capacity * 1000), version = b.version + 1
    FROM unnest(l.dims, l.costs) AS u(d, c)
    WHERE b.name = u.d AND b.limit_type = 3;
END $$;

-- extend moves a live lease's expiry to now+ttl. o_status: 0 done,
-- 1 unknown lease, 2 expired.
CREATE FUNCTION __SCHEMA__.extend(p_id uuid, p_now bigint, p_ttl bigint,
    OUT o_status int, OUT o_expires bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint;
    v_exp bigint;
BEGIN
    SELECT expires_ms INTO v_exp FROM __SCHEMA__.leases WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        o_status := 1;
        RETURN;
    END IF;
    v_now := coalesce(p_now, __SCHEMA__.now_ms());
    IF v_exp <= v_now THEN
        o_status := 2;
        RETURN;
    END IF;
    o_expires := v_now + p_ttl;
    UPDATE __SCHEMA__.leases SET expires_ms = o_expires WHERE id = p_id;
    o_status := 0;
END $$;

-- adjust settles an estimate on one requests or tokens item. o_err:
-- 'unknown', 'concurrent', 'nolease', 'expired', 'notinlease', 'refund'
-- (o_held is what the lease holds).
CREATE FUNCTION __SCHEMA__.adjust(p_dim text, p_delta bigint, p_now bigint, p_id uuid,
    p_recorded boolean, p_held bigint, p_expires bigint,
    OUT o_err text, OUT o_held bigint, OUT o_applied bigint, OUT o_remaining bigint)
LANGUAGE plpgsql AS $$
DECLARE
    l record;
    b record;
    have_lease boolean := false;
    k int;
    v_now bigint;
    held bigint;
    r bigint[];
    t bigint;
    fl bigint;
BEGIN
    IF p_recorded THEN
        SELECT dims, costs, expires_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id FOR UPDATE;
        have_lease := FOUND;
    END IF;
    SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_dim FOR UPDATE;
    IF NOT FOUND THEN
        o_err := 'unknown';
        RETURN;
    END IF;
    IF b.limit_type = 3 THEN
        o_err := 'concurrent';
        RETURN;
    END IF;
    v_now := coalesce(p_now, __SCHEMA__.now_ms());
    IF p_recorded THEN
        IF NOT have_lease THEN
            o_err := 'nolease';
            RETURN;
        END IF;
        IF l.expires_ms <= v_now THEN
            o_err := 'expired';
            RETURN;
        END IF;
        k := array_position(l.dims, p_dim);
        IF k IS NULL THEN
            o_err := 'notinlease';
            RETURN;
        END IF;
        held := l.costs[k];
    ELSE
        held := p_held;
        IF p_expires IS NOT NULL AND p_expires <= v_now THEN
            o_err := 'expired';
            RETURN;
        END IF;
    END IF;
    IF p_delta < 0 AND -p_delta > held THEN
        o_err := 'refund'; o_held := held;
        RETURN;
    END IF;
    o_held := held + p_delta;
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, b.last_refill_ms, v_now);
    fl := __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt);
    t := least(greatest(r[1] - p_delta * 1000, fl), b.capacity * 1000);
    o_applied := r[1] - t;
    o_remaining := t;
    UPDATE __SCHEMA__.buckets SET tokens = t, last_refill_ms = r[2], version = version + 1 WHERE name = p_dim;
    IF p_recorded THEN
        UPDATE __SCHEMA__.leases SET costs[k] = o_held WHERE id = p_id;
    END IF;
END $$;

-- penalize refills a requests or tokens bucket to now and multiplies a
-- positive balance by p_factor/1000. o_err: 'unknown', 'concurrent'.
CREATE FUNCTION __SCHEMA__.penalize(p_dim text, p_now bigint, p_factor bigint,
    OUT o_err text, OUT o_before bigint, OUT o_after bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
    r bigint[];
BEGIN
    SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_dim FOR UPDATE;
    IF NOT FOUND THEN
        o_err := 'unknown';
        RETURN;
    END IF;
    IF b.limit_type = 3 THEN
        o_err := 'concurrent';
        RETURN;
    END IF;
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, b.last_refill_ms,
                           coalesce(p_now, __SCHEMA__.now_ms()));
    o_before := r[1];
    o_after := CASE WHEN r[1] > 0 THEN r[1] * p_factor / 1000 ELSE r[1] END;
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2], version = version + 1 WHERE name = p_dim;
END $$;

-- put_bucket creates a bucket (full) or reconfigures one, keeping its
-- balance refilled under the old limits and clamped to the new ones, or
-- filling it when p_reset.
CREATE FUNCTION __SCHEMA__.put_bucket(p_name text, p_type smallint, p_cap bigint, p_amt bigint, p_per bigint,
    p_cpc bigint, p_debt bigint, p_now bigint, p_reset boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    b record;
    v_now bigint;
    r bigint[];
BEGIN
    LOOP
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_name FOR UPDATE;
        v_now := coalesce(p_now, __SCHEMA__.now_ms());
        IF FOUND THEN
            IF p_reset THEN
                r := ARRAY[p_cap * 1000, v_now];
            ELSE
                r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms,
                                       b.tokens, b.last_refill_ms, v_now);
            END IF;
            UPDATE __SCHEMA__.buckets
            SET limit_type = p_type, capacity = p_cap, refill_amount = p_amt, refill_period_ms = p_per,
                cost_per_call = p_cpc, max_debt = p_debt,
                tokens = least(greatest(r[1], __SCHEMA__.floor_milli(p_type, p_cap, p_debt)), p_cap * 1000),
                last_refill_ms = r[2], version = b.version + 1
            WHERE name = p_name;
            RETURN;
        END IF;
        INSERT INTO __SCHEMA__.buckets (name, limit_type, capacity, refill_amount, refill_period_ms,
                                        cost_per_call, max_debt, tokens, last_refill_ms)
        VALUES (p_name, p_type, p_cap, p_amt, p_per, p_cpc, p_debt, p_cap * 1000, v_now)
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
        -- Another transaction created it first: reconfigure that one.
    END LOOP;
END $$;

-- reconcile processes up to p_limit expired lease records, skipping rows
-- another transaction holds (FOR UPDATE SKIP LOCKED), so that concurrent
-- reconcilers never wait for each other and never restore a lease twice.
-- Concurrent costs go back with the capacity guard; every processed record
-- is deleted; records with no bucket left are counted as orphans.
CREATE FUNCTION __SCHEMA__.reconcile(p_now bigint, p_limit int,
    OUT o_restored int, OUT o_reclaimed int, OUT o_capped int, OUT o_orphans int,
    OUT o_dims text[], OUT o_more boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint := coalesce(p_now, __SCHEMA__.now_ms());
    ids uuid[];
BEGIN
    SELECT coalesce(array_agg(s.id ORDER BY s.expires_ms, s.id), '{}') INTO ids
    FROM (SELECT id, expires_ms FROM __SCHEMA__.leases WHERE expires_ms <= v_now
          ORDER BY expires_ms, id LIMIT p_limit FOR UPDATE SKIP LOCKED) s;
    o_restored := 0; o_reclaimed := 0; o_capped := 0; o_orphans := 0; o_dims := '{}'; o_more := false;
    IF cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM __SCHEMA__.buckets
    WHERE name IN (SELECT unnest(dims) FROM __SCHEMA__.leases WHERE id = ANY (ids))
    ORDER BY name FOR UPDATE;
    WITH items AS (
        SELECT k.o AS lo, u.d, u.c
        FROM unnest(ids) WITH ORDINALITY AS k(id, o)
        JOIN __SCHEMA__.leases x ON x.id = k.id
        CROSS JOIN LATERAL unnest(x.dims, x.costs) AS u(d, c)
    ), j AS (
        SELECT i.lo, i.d, i.c, b.name IS NOT NULL AS live, coalesce(b.limit_type = 3, false) AS conc,
               b.capacity * 1000 AS cap, b.tokens AS tok,
               sum(i.c * 1000) OVER (PARTITION BY i.d ORDER BY i.lo ROWS UNBOUNDED PRECEDING) AS run
        FROM items i LEFT JOIN __SCHEMA__.buckets b ON b.name = i.d
    ), upd AS (
        UPDATE __SCHEMA__.buckets b
        SET tokens = least(b.tokens + s.total, b.capacity * 1000), version = b.version + 1
        FROM (SELECT d, sum(c * 1000)::bigint AS total FROM j WHERE live AND conc GROUP BY d) s
        WHERE b.name = s.d
        RETURNING 1
    ), del AS (
        DELETE FROM __SCHEMA__.leases WHERE id = ANY (ids) RETURNING 1
    ), per_lease AS (
        SELECT lo, bool_or(live) AS live, bool_or(live AND conc) AS reclaimed,
               bool_or(live AND conc AND tok + run > cap) AS capped
        FROM j GROUP BY lo
    )
    SELECT count(*)::int,
           (count(*) FILTER (WHERE live AND reclaimed))::int,
           (count(*) FILTER (WHERE live AND capped))::int,
           (count(*) FILTER (WHERE NOT live))::int,
           coalesce((SELECT array_agg(DISTINCT d ORDER BY d) FROM j WHERE live), '{}')
    INTO o_restored, o_reclaimed, o_capped, o_orphans, o_dims
    FROM per_lease;
    o_more := cardinality(ids) = p_limit AND EXISTS (
        SELECT 1 FROM __SCHEMA__.leases WHERE expires_ms <= v_now AND id <> ALL (ids));
END $$;
