-- Sluice PostgreSQL store, schema version 2: every function. First the
-- integer token-bucket math, a line-by-line port of package bucket; then
-- one function per store operation.
--
-- Every function that touches several buckets locks them in name order
-- (ORDER BY name FOR UPDATE; the column's collation is "C"), and lease rows
-- are always locked before bucket rows, so operations never deadlock.
-- p_now NULL means the server clock, read after the locks are held. Every
-- computation on a time-based bucket first aligns the stored state with the
-- decision time (align, a port of bucket.Align): a caller behind the last
-- write by at most p_skew ms decides at that write's time; one further
-- behind rebases the bucket to its own clock. Lease expiries use the
-- caller's time.
--
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

-- now_ms is the server clock in Unix milliseconds, truncated like
-- time.Time.UnixMilli.
CREATE FUNCTION __SCHEMA__.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS
$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- mul_div is floor(a*b/c) for a, b >= 0, c > 0, saturating at max int8.
CREATE FUNCTION __SCHEMA__.mul_div(a bigint, b bigint, c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT least(div(a::numeric * b, c), 9223372036854775807)::bigint $$;

-- ceil_mul_div is ceil(a*b/c) for a, b >= 0, c > 0, saturating.
CREATE FUNCTION __SCHEMA__.ceil_mul_div(a bigint, b bigint, c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT least(div(a::numeric * b + (c - 1), c), 9223372036854775807)::bigint $$;

-- prod_less reports a*b < c*d exactly.
CREATE FUNCTION __SCHEMA__.prod_less(a bigint, b bigint, c bigint, d bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT a::numeric * b < c::numeric * d $$;

-- refill is bucket.Refill: {tokens, last} earned up to now. cap and amt are
-- millitokens, per is ms.
CREATE FUNCTION __SCHEMA__.refill(cap bigint, amt bigint, per bigint, tok bigint, last bigint, now bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    a bigint;
BEGIN
    IF amt <= 0 OR now <= last THEN
        RETURN ARRAY[tok, last];
    END IF;
    IF tok >= cap OR NOT __SCHEMA__.prod_less(now - last, amt, cap - tok, per) THEN
        RETURN ARRAY[cap, now];
    END IF;
    a := __SCHEMA__.mul_div(now - last, amt, per);
    IF a = 0 THEN
        RETURN ARRAY[tok, last];
    END IF;
    RETURN ARRAY[tok + a, last + __SCHEMA__.ceil_mul_div(a, per, amt)];
END $$;

-- retry_in is bucket.RetryIn on the stored (unrefilled) state.
CREATE FUNCTION __SCHEMA__.retry_in(cap bigint, amt bigint, per bigint, tok bigint, last bigint, now bigint, cost bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e bigint;
    w bigint;
    max_retry CONSTANT bigint := 3162240000000; -- bucket.MaxRetryMs
BEGIN
    IF amt <= 0 OR tok >= cost OR tok >= cap THEN
        RETURN 0;
    END IF;
    e := __SCHEMA__.ceil_mul_div(cost - tok, per, amt);
    IF e > max_retry THEN
        RETURN max_retry;
    END IF;
    w := last + e - now;
    IF w <= 0 THEN
        RETURN 0;
    ELSIF w > max_retry THEN
        RETURN max_retry;
    END IF;
    RETURN w;
END $$;

-- floor_milli is bucket.Limits.Floor: the lowest balance Adjust may reach.
CREATE FUNCTION __SCHEMA__.floor_milli(limit_type smallint, capacity bigint, max_debt bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN limit_type = 3 OR max_debt = -1 THEN 0
            WHEN max_debt = 0 THEN -capacity * 1000
            ELSE -max_debt * 1000 END
$$;

-- align is bucket.Align: {last, now} to decide at, the tokens being kept.
-- amt is the refill amount (0 for concurrent buckets, which never align).
CREATE FUNCTION __SCHEMA__.align(amt bigint, last bigint, now bigint, skew bigint)
RETURNS bigint[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR now >= last THEN ARRAY[last, now]
            WHEN last - now <= skew THEN ARRAY[last, last]
            ELSE ARRAY[now, now] END
$$;

-- acquire debits every dimension or none. o_err: 'unknown' (o_dim has no
-- bucket), 'cost' (o_dim's cost exceeds its capacity), 'inuse' (p_id has a
-- record for other dimensions or costs); nothing changed then. A retry of
-- a recorded grant (same id, same items) returns that grant, changing
-- nothing. A denial writes only the rebase of a bucket whose last write was
-- more than p_skew ahead.
CREATE FUNCTION __SCHEMA__.acquire(
    p_dims text[], p_costs bigint[], p_now bigint, p_ttl bigint, p_id uuid,
    p_caller text, p_record boolean, p_poll bigint, p_skew bigint,
    OUT o_err text, OUT o_dim text, OUT o_granted boolean, OUT o_recorded boolean,
    OUT o_now bigint, OUT o_retry bigint, OUT o_types smallint[], OUT o_costs bigint[],
    OUT o_caps bigint[], OUT o_remaining bigint[], OUT o_waits bigint[], OUT o_expires bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n int := cardinality(p_dims);
    b record;
    l record;
    i int;
    c bigint;
    r bigint[];
    al bigint[];
    w bigint;
    amts bigint[] := array_fill(0::bigint, ARRAY[n]);
    pers bigint[] := array_fill(0::bigint, ARRAY[n]);
    toks bigint[] := array_fill(0::bigint, ARRAY[n]);
    lasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    alasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    ats bigint[] := array_fill(0::bigint, ARRAY[n]);
    ntoks bigint[] := array_fill(0::bigint, ARRAY[n]);
    nlasts bigint[] := array_fill(0::bigint, ARRAY[n]);
    v_incs bigint[] := array_fill(0::bigint, ARRAY[n]);
    avail bigint[] := array_fill(0::bigint, ARRAY[n]);
    conc boolean := false;
    v_type smallint;
    v_cap bigint;
    v_amt bigint;
    v_per bigint;
    v_tok bigint;
    v_last bigint;
    v_alast bigint;
    v_at bigint;
    v_inc bigint;
    v_t bigint;
    v_l bigint;
    a bigint;
BEGIN
    IF n = 1 THEN
        -- The common case, with scalars only: one bucket, bucket.Align and
        -- bucket.Take inline.
        SELECT bk.limit_type, bk.capacity, bk.refill_amount * 1000, bk.refill_period_ms,
               CASE WHEN p_costs[1] <> 0 THEN p_costs[1] WHEN bk.cost_per_call = 0 THEN 1 ELSE bk.cost_per_call END,
               bk.tokens, bk.last_refill_ms, bk.incarnation
        INTO v_type, v_cap, v_amt, v_per, c, v_tok, v_last, v_inc
        FROM __SCHEMA__.buckets bk WHERE bk.name = p_dims[1] FOR UPDATE;
        IF NOT FOUND THEN
            o_err := 'unknown'; o_dim := p_dims[1];
            RETURN;
        END IF;
        o_types := ARRAY[v_type]; o_costs := ARRAY[c]; o_caps := ARRAY[v_cap]; o_waits := ARRAY[0::bigint];
        IF c > v_cap THEN
            o_err := 'cost'; o_dim := p_dims[1];
            RETURN;
        END IF;
        o_now := coalesce(p_now, __SCHEMA__.now_ms());
        -- bucket.Align
        v_alast := v_last; v_at := o_now;
        IF v_amt > 0 AND o_now < v_last THEN
            IF v_last - o_now <= p_skew THEN
                v_at := v_last;
            ELSE
                v_alast := o_now;
            END IF;
        END IF;
        SELECT dims, costs, expires_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
        IF FOUND THEN
            SELECT * INTO o_err, o_granted, o_recorded, o_retry, o_remaining, o_expires
            FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps,
                                   ARRAY[v_amt], ARRAY[v_per], ARRAY[v_tok], ARRAY[v_alast], ARRAY[v_at]);
            RETURN;
        END IF;
        -- bucket.Refill
        IF v_amt > 0 AND v_at > v_alast THEN
            IF v_tok >= v_cap * 1000 OR NOT __SCHEMA__.prod_less(v_at - v_alast, v_amt, v_cap * 1000 - v_tok, v_per) THEN
                v_t := v_cap * 1000; v_l := v_at;
            ELSE
                a := __SCHEMA__.mul_div(v_at - v_alast, v_amt, v_per);
                IF a = 0 THEN
                    v_t := v_tok; v_l := v_alast;
                ELSE
                    v_t := v_tok + a; v_l := v_alast + __SCHEMA__.ceil_mul_div(a, v_per, v_amt);
                END IF;
            END IF;
        ELSE
            v_t := v_tok; v_l := v_alast;
        END IF;
        IF v_t < c * 1000 THEN
            o_granted := false; o_recorded := false;
            IF v_type = 3 THEN
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> p_dims AND incs[array_position(dims, p_dims[1])] = v_inc;
                w := greatest(CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END, 1);
            ELSE
                w := __SCHEMA__.retry_in(v_cap * 1000, v_amt, v_per, v_tok, v_alast, v_at, c * 1000);
            END IF;
            o_retry := w; o_waits := ARRAY[w]; o_remaining := ARRAY[v_t];
            IF v_alast <> v_last THEN
                -- Rebased: a denial writes that, and only that.
                UPDATE __SCHEMA__.buckets SET last_refill_ms = v_alast, version = version + 1 WHERE name = p_dims[1];
            END IF;
            RETURN;
        END IF;
        o_granted := true; o_retry := 0;
        o_remaining := ARRAY[v_t - c * 1000];
        o_recorded := p_record OR v_type = 3;
        IF o_recorded THEN
            INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs, incs)
            VALUES (p_id, p_caller, o_now, o_now + p_ttl, p_dims, o_costs, ARRAY[v_inc])
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                -- A concurrent acquisition with the same id committed first.
                SELECT dims, costs, expires_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
                SELECT * INTO o_err, o_granted, o_recorded, o_retry, o_remaining, o_expires
                FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps,
                                       ARRAY[v_amt], ARRAY[v_per], ARRAY[v_tok], ARRAY[v_alast], ARRAY[v_at]);
                RETURN;
            END IF;
        END IF;
        o_expires := o_now + p_ttl;
        UPDATE __SCHEMA__.buckets SET tokens = v_t - c * 1000, last_refill_ms = v_l, version = version + 1
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
        v_incs[i] := b.incarnation;
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
    FOR i IN 1..n LOOP
        al := __SCHEMA__.align(amts[i], lasts[i], o_now, p_skew);
        alasts[i] := al[1]; ats[i] := al[2];
    END LOOP;
    SELECT dims, costs, expires_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
    IF FOUND THEN
        SELECT * INTO o_err, o_granted, o_recorded, o_retry, o_remaining, o_expires
        FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps, amts, pers, toks, alasts, ats);
        RETURN;
    END IF;
    o_granted := true;
    o_retry := 0;
    FOR i IN 1..n LOOP
        c := o_costs[i] * 1000;
        r := __SCHEMA__.refill(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], ats[i]);
        avail[i] := r[1];
        IF r[1] >= c THEN
            ntoks[i] := r[1] - c;
            nlasts[i] := r[2];
            o_remaining[i] := r[1] - c;
        ELSE
            o_granted := false;
            IF o_types[i] = 3 THEN
                -- bucket.ConcurrentRetry over this dimension's earliest expiry.
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> ARRAY[p_dims[i]] AND incs[array_position(dims, p_dims[i])] = v_incs[i];
                w := CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END;
                w := greatest(w, 1);
            ELSE
                w := __SCHEMA__.retry_in(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], ats[i], c);
            END IF;
            o_waits[i] := w;
            o_retry := greatest(o_retry, w);
        END IF;
    END LOOP;
    o_recorded := false;
    IF NOT o_granted THEN
        o_remaining := avail;
        -- A bucket whose last write was more than the maximum skew ahead is
        -- rebased even on a denial, or its refill would never start.
        UPDATE __SCHEMA__.buckets bk SET last_refill_ms = u.al, version = bk.version + 1
        FROM unnest(p_dims, lasts, alasts) AS u(d, l, al) WHERE bk.name = u.d AND u.al <> u.l;
        RETURN;
    END IF;
    IF p_record OR conc THEN
        INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs, incs)
        VALUES (p_id, p_caller, o_now, o_now + p_ttl, p_dims, o_costs, v_incs)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            -- A concurrent acquisition with the same id committed first.
            SELECT dims, costs, expires_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
            SELECT * INTO o_err, o_granted, o_recorded, o_retry, o_remaining, o_expires
            FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps, amts, pers, toks, alasts, ats);
            RETURN;
        END IF;
        o_recorded := true;
    END IF;
    o_expires := o_now + p_ttl;
    UPDATE __SCHEMA__.buckets bk SET tokens = u.t, last_refill_ms = u.l, version = bk.version + 1
    FROM unnest(p_dims, ntoks, nlasts) AS u(d, t, l) WHERE bk.name = u.d;
END $$;

-- replay answers an acquisition whose id has a record (r_dims, r_costs,
-- r_expires): the grant it was, with the balances available at the aligned
-- times, when the record holds the same dimensions at the same costs in any
-- order; 'inuse' otherwise. Dimensions are unique within a request and
-- within a record, so equal sizes and inclusion mean equal sets.
CREATE FUNCTION __SCHEMA__.replay(r_dims text[], r_costs bigint[], r_expires bigint,
    p_dims text[], p_costs bigint[], p_caps bigint[], amts bigint[], pers bigint[], toks bigint[],
    alasts bigint[], ats bigint[],
    OUT o_err text, OUT o_granted boolean, OUT o_recorded boolean, OUT o_retry bigint,
    OUT o_remaining bigint[], OUT o_expires bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF r_dims IS NULL OR cardinality(r_dims) <> cardinality(p_dims) OR EXISTS (
        SELECT 1 FROM unnest(p_dims, p_costs) AS u(d, c)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(r_dims, r_costs) AS v(d, c) WHERE v.d = u.d AND v.c = u.c)) THEN
        o_err := 'inuse'; o_granted := false; o_recorded := false;
        RETURN;
    END IF;
    o_granted := true; o_recorded := true; o_retry := 0; o_expires := r_expires;
    SELECT array_agg((__SCHEMA__.refill(p_caps[k] * 1000, amts[k], pers[k], toks[k], alasts[k], ats[k]))[1] ORDER BY k)
    INTO o_remaining FROM generate_subscripts(p_dims, 1) AS k;
END $$;

-- release deletes a lease record and returns its concurrent costs, capped at
-- capacity, exactly once, into the buckets it was granted on only: an item
-- whose bucket was deleted (and perhaps re-created) restores nothing.
CREATE FUNCTION __SCHEMA__.release(p_id uuid,
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

-- adjust settles an estimate on one requests or tokens item. o_err, in
-- order of precedence: 'unknown', 'concurrent', 'nolease' (recorded lease
-- without record), 'notinlease', 'expired' (a refund on an expired lease),
-- 'refund' (larger than o_held, what the lease holds). A charge is applied
-- even on an expired lease and raises the held cost by the whole tokens
-- actually charged (store.HeldAfter).
CREATE FUNCTION __SCHEMA__.adjust(p_dim text, p_delta bigint, p_now bigint, p_id uuid,
    p_recorded boolean, p_held bigint, p_expires bigint, p_skew bigint,
    OUT o_err text, OUT o_held bigint, OUT o_applied bigint, OUT o_remaining bigint)
LANGUAGE plpgsql AS $$
DECLARE
    l record;
    b record;
    have_lease boolean := false;
    k int;
    v_now bigint;
    held bigint;
    v_exp bigint;
    al bigint[];
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
        k := array_position(l.dims, p_dim);
        IF k IS NULL THEN
            o_err := 'notinlease';
            RETURN;
        END IF;
        held := l.costs[k];
        v_exp := l.expires_ms;
    ELSE
        held := p_held;
        v_exp := p_expires;
    END IF;
    IF p_delta < 0 AND v_exp IS NOT NULL AND v_exp <= v_now THEN
        o_err := 'expired';
        RETURN;
    END IF;
    IF p_delta < 0 AND -p_delta > held THEN
        o_err := 'refund'; o_held := held;
        RETURN;
    END IF;
    al := __SCHEMA__.align(b.refill_amount * 1000, b.last_refill_ms, v_now, p_skew);
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1], al[2]);
    fl := __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt);
    t := least(greatest(r[1] - p_delta * 1000, fl), b.capacity * 1000);
    o_applied := r[1] - t;
    o_remaining := t;
    o_held := CASE WHEN p_delta < 0 THEN held + p_delta ELSE held + greatest(0, o_applied / 1000) END;
    UPDATE __SCHEMA__.buckets SET tokens = t, last_refill_ms = r[2], version = version + 1 WHERE name = p_dim;
    IF p_recorded THEN
        UPDATE __SCHEMA__.leases SET costs[k] = o_held WHERE id = p_id;
    END IF;
END $$;

-- penalize refills a requests or tokens bucket to the aligned time and
-- multiplies a positive balance by p_factor/1000. o_err: 'unknown',
-- 'concurrent'.
CREATE FUNCTION __SCHEMA__.penalize(p_dim text, p_now bigint, p_factor bigint, p_skew bigint,
    OUT o_err text, OUT o_before bigint, OUT o_after bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
    al bigint[];
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
    al := __SCHEMA__.align(b.refill_amount * 1000, b.last_refill_ms, coalesce(p_now, __SCHEMA__.now_ms()), p_skew);
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1], al[2]);
    o_before := r[1];
    o_after := CASE WHEN r[1] > 0 THEN r[1] * p_factor / 1000 ELSE r[1] END;
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2], version = version + 1 WHERE name = p_dim;
END $$;

-- put_bucket creates a bucket (full, with a new incarnation) or
-- reconfigures one at the aligned time, keeping its incarnation
-- (bucket.Reconfigure). It returns NULL, or the existing bucket's limit
-- type when the change is refused: to or from concurrent, which only a
-- delete and re-create may do; nothing changes then.
CREATE FUNCTION __SCHEMA__.put_bucket(p_name text, p_type smallint, p_cap bigint, p_amt bigint, p_per bigint,
    p_cpc bigint, p_debt bigint, p_now bigint, p_reset boolean, p_skew bigint)
RETURNS smallint LANGUAGE plpgsql AS $$
DECLARE
    b record;
    v_now bigint;
    al bigint[];
    r bigint[];
    t bigint;
BEGIN
    LOOP
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_name FOR UPDATE;
        v_now := coalesce(p_now, __SCHEMA__.now_ms());
        IF FOUND THEN
            IF (b.limit_type = 3) <> (p_type = 3) THEN
                RETURN b.limit_type;
            END IF;
            al := __SCHEMA__.align(b.refill_amount * 1000, b.last_refill_ms, v_now, p_skew);
            IF p_reset THEN
                r := ARRAY[p_cap * 1000, al[2]];
                t := r[1];
            ELSE
                r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms,
                                       b.tokens, al[1], al[2]);
                IF b.limit_type = 3 THEN
                    t := least(r[1] + (p_cap - b.capacity) * 1000, p_cap * 1000);
                ELSE
                    t := least(greatest(r[1], __SCHEMA__.floor_milli(p_type, p_cap, p_debt)), p_cap * 1000);
                END IF;
            END IF;
            UPDATE __SCHEMA__.buckets
            SET limit_type = p_type, capacity = p_cap, refill_amount = p_amt, refill_period_ms = p_per,
                cost_per_call = p_cpc, max_debt = p_debt,
                tokens = t,
                last_refill_ms = r[2], version = b.version + 1
            WHERE name = p_name;
            RETURN NULL;
        END IF;
        INSERT INTO __SCHEMA__.buckets (name, limit_type, capacity, refill_amount, refill_period_ms,
                                        cost_per_call, max_debt, tokens, last_refill_ms)
        VALUES (p_name, p_type, p_cap, p_amt, p_per, p_cpc, p_debt, p_cap * 1000, v_now)
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        -- Another transaction created it first: reconfigure that one.
    END LOOP;
END $$;

-- reconcile processes up to p_limit expired lease records, skipping rows
-- another transaction holds (FOR UPDATE SKIP LOCKED), so that concurrent
-- reconcilers never wait for each other and never restore a lease twice.
-- Concurrent costs go back with the capacity guard, only into the very
-- bucket each item was granted on (same incarnation); every processed
-- record is deleted; a lease with no such bucket left is an orphan.
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
        SELECT k.o AS lo, u.d, u.c, u.inc
        FROM unnest(ids) WITH ORDINALITY AS k(id, o)
        JOIN __SCHEMA__.leases x ON x.id = k.id
        CROSS JOIN LATERAL unnest(x.dims, x.costs, x.incs) AS u(d, c, inc)
    ), j AS (
        SELECT i.lo, i.d, i.c, b.name IS NOT NULL AS live, coalesce(b.limit_type = 3, false) AS conc,
               b.capacity * 1000 AS cap, b.tokens AS tok,
               sum(i.c * 1000) OVER (PARTITION BY i.d, i.inc ORDER BY i.lo ROWS UNBOUNDED PRECEDING) AS run
        FROM items i LEFT JOIN __SCHEMA__.buckets b ON b.name = i.d AND b.incarnation = i.inc
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
