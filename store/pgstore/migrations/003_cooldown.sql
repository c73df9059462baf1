-- Sluice PostgreSQL store, schema version 3: cooldowns. A bucket keeps the
-- end of its last cooldown (bucket.State.Until) in cooldown_until_ms; every
-- function that does bucket math honours it (nothing earned and nothing
-- granted before it, earning from it on; during a cooldown a refund lifts
-- the balance at most to zero; a reset ends it), and two new functions,
-- cooldown and sync, start a cooldown and lower a balance to what a vendor
-- reports as remaining.
--
-- Upgrading in place: the column is added with a constant default, which
-- PostgreSQL does without rewriting the table, so every bucket keeps its
-- balance and reads as never cooled (0). The operation functions keep their
-- signatures (CREATE OR REPLACE), so processes still running the previous
-- code keep working during a rolling upgrade, and honour cooldowns too. The
-- math helpers refill, retry_in and replay gain an until argument as new
-- overloads; the version-2 ones stay for calls already running when this
-- migration commits.
--
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

ALTER TABLE __SCHEMA__.buckets ADD COLUMN cooldown_until_ms bigint NOT NULL DEFAULT 0; -- Unix ms, 0 = never

-- refill is bucket.Refill: {tokens, last} earned up to now. Nothing is
-- earned before until_ms (the cooldown's end, 0 for none), and earning
-- restarts from it. cap and amt are millitokens, per is ms.
CREATE FUNCTION __SCHEMA__.refill(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint, now bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    a bigint;
BEGIN
    IF amt <= 0 OR now <= last OR now <= until_ms THEN
        RETURN ARRAY[tok, last];
    END IF;
    last := greatest(last, until_ms);
    IF tok >= cap OR NOT __SCHEMA__.prod_less(now - last, amt, cap - tok, per) THEN
        RETURN ARRAY[cap, now];
    END IF;
    a := __SCHEMA__.mul_div(now - last, amt, per);
    IF a = 0 THEN
        RETURN ARRAY[tok, last];
    END IF;
    RETURN ARRAY[tok + a, last + __SCHEMA__.ceil_mul_div(a, per, amt)];
END $$;

-- retry_in is bucket.RetryIn on the stored (unrefilled) state: during a
-- cooldown the wait runs to until_ms and then for as long as the bucket
-- takes to earn cost from there.
CREATE FUNCTION __SCHEMA__.retry_in(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint,
    now bigint, cost bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e bigint;
    w bigint;
    max_retry CONSTANT bigint := 3162240000000; -- bucket.MaxRetryMs
BEGIN
    IF amt <= 0 THEN
        RETURN 0;
    END IF;
    IF tok >= cost OR tok >= cap THEN
        RETURN least(greatest(until_ms - now, 0), max_retry);
    END IF;
    e := __SCHEMA__.ceil_mul_div(cost - tok, per, amt);
    IF e > max_retry THEN
        RETURN max_retry;
    END IF;
    w := greatest(last, until_ms) + e - now;
    IF w <= 0 THEN
        RETURN 0;
    ELSIF w > max_retry THEN
        RETURN max_retry;
    END IF;
    RETURN w;
END $$;

-- replay answers an acquisition whose id has a record (r_dims, r_costs,
-- r_expires): the grant it was, with the balances available at the aligned
-- times, when the record holds the same dimensions at the same costs in any
-- order; 'inuse' otherwise. Dimensions are unique within a request and
-- within a record, so equal sizes and inclusion mean equal sets.
CREATE FUNCTION __SCHEMA__.replay(r_dims text[], r_costs bigint[], r_expires bigint,
    p_dims text[], p_costs bigint[], p_caps bigint[], amts bigint[], pers bigint[], toks bigint[],
    alasts bigint[], untils bigint[], ats bigint[],
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
    SELECT array_agg((__SCHEMA__.refill(p_caps[k] * 1000, amts[k], pers[k], toks[k], alasts[k], untils[k], ats[k]))[1] ORDER BY k)
    INTO o_remaining FROM generate_subscripts(p_dims, 1) AS k;
END $$;

-- acquire debits every dimension or none. o_err: 'unknown' (o_dim has no
-- bucket), 'cost' (o_dim's cost exceeds its capacity), 'inuse' (p_id has a
-- record for other dimensions or costs); nothing changed then. A retry of
-- a recorded grant (same id, same items) returns that grant, changing
-- nothing. A denial writes only the rebase of a bucket whose last write was
-- more than p_skew ahead. Nothing is granted on a bucket before the end of
-- its cooldown (bucket.Take).
CREATE OR REPLACE FUNCTION __SCHEMA__.acquire(
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
    untils bigint[] := array_fill(0::bigint, ARRAY[n]);
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
    v_until bigint;
    v_alast bigint;
    v_from bigint;
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
               bk.tokens, bk.last_refill_ms, bk.cooldown_until_ms, bk.incarnation
        INTO v_type, v_cap, v_amt, v_per, c, v_tok, v_last, v_until, v_inc
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
                                   ARRAY[v_amt], ARRAY[v_per], ARRAY[v_tok], ARRAY[v_alast], ARRAY[v_until], ARRAY[v_at]);
            RETURN;
        END IF;
        -- bucket.Refill
        IF v_amt > 0 AND v_at > v_alast AND v_at > v_until THEN
            v_from := greatest(v_alast, v_until);
            IF v_tok >= v_cap * 1000 OR NOT __SCHEMA__.prod_less(v_at - v_from, v_amt, v_cap * 1000 - v_tok, v_per) THEN
                v_t := v_cap * 1000; v_l := v_at;
            ELSE
                a := __SCHEMA__.mul_div(v_at - v_from, v_amt, v_per);
                IF a = 0 THEN
                    v_t := v_tok; v_l := v_from;
                ELSE
                    v_t := v_tok + a; v_l := v_from + __SCHEMA__.ceil_mul_div(a, v_per, v_amt);
                END IF;
            END IF;
        ELSE
            v_t := v_tok; v_l := v_alast;
        END IF;
        IF v_t < c * 1000 OR v_at < v_until THEN
            o_granted := false; o_recorded := false;
            IF v_type = 3 THEN
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> p_dims AND incs[array_position(dims, p_dims[1])] = v_inc;
                w := greatest(CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END, 1);
            ELSE
                w := __SCHEMA__.retry_in(v_cap * 1000, v_amt, v_per, v_tok, v_alast, v_until, v_at, c * 1000);
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
                                       ARRAY[v_amt], ARRAY[v_per], ARRAY[v_tok], ARRAY[v_alast], ARRAY[v_until], ARRAY[v_at]);
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
        i := array_position(p_dims, b.name);
        o_types[i] := b.limit_type;
        o_caps[i] := b.capacity;
        o_costs[i] := CASE WHEN p_costs[i] <> 0 THEN p_costs[i] WHEN b.cost_per_call = 0 THEN 1 ELSE b.cost_per_call END;
        amts[i] := b.refill_amount * 1000;
        pers[i] := b.refill_period_ms;
        toks[i] := b.tokens;
        lasts[i] := b.last_refill_ms;
        untils[i] := b.cooldown_until_ms;
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
        FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps, amts, pers, toks, alasts, untils, ats);
        RETURN;
    END IF;
    o_granted := true;
    o_retry := 0;
    FOR i IN 1..n LOOP
        c := o_costs[i] * 1000;
        r := __SCHEMA__.refill(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], untils[i], ats[i]);
        avail[i] := r[1];
        IF r[1] >= c AND ats[i] >= untils[i] THEN
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
                w := __SCHEMA__.retry_in(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], untils[i], ats[i], c);
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
            FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps, amts, pers, toks, alasts, untils, ats);
            RETURN;
        END IF;
        o_recorded := true;
    END IF;
    o_expires := o_now + p_ttl;
    UPDATE __SCHEMA__.buckets bk SET tokens = u.t, last_refill_ms = u.l, version = bk.version + 1
    FROM unnest(p_dims, ntoks, nlasts) AS u(d, t, l) WHERE bk.name = u.d;
END $$;

-- adjust settles an estimate on one requests or tokens item. o_err, in
-- order of precedence: 'unknown', 'concurrent', 'nolease' (recorded lease
-- without record), 'notinlease', 'expired' (a refund on an expired lease),
-- 'refund' (larger than o_held, what the lease holds). A charge is applied
-- even on an expired lease and raises the held cost by the whole tokens
-- actually charged (store.HeldAfter). During a cooldown a refund lifts the
-- balance at most to zero (bucket.Adjust).
CREATE OR REPLACE FUNCTION __SCHEMA__.adjust(p_dim text, p_delta bigint, p_now bigint, p_id uuid,
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
    v_ceil bigint;
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
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1],
                           b.cooldown_until_ms, al[2]);
    fl := __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt);
    v_ceil := b.capacity * 1000;
    IF al[2] < b.cooldown_until_ms THEN
        v_ceil := least(v_ceil, greatest(r[1], 0));
    END IF;
    t := least(greatest(r[1] - p_delta * 1000, fl), v_ceil);
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
CREATE OR REPLACE FUNCTION __SCHEMA__.penalize(p_dim text, p_now bigint, p_factor bigint, p_skew bigint,
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
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1],
                           b.cooldown_until_ms, al[2]);
    o_before := r[1];
    o_after := CASE WHEN r[1] > 0 THEN r[1] * p_factor / 1000 ELSE r[1] END;
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2], version = version + 1 WHERE name = p_dim;
END $$;

-- cooldown is bucket.Cooldown at the aligned time: the bucket is refilled,
-- a positive balance drops to zero, and nothing is granted before the
-- aligned time plus p_dur ms (a running cooldown that ends later is kept);
-- from then on the bucket earns at its refill rate. A p_dur at or below
-- zero only refills. o_until is the cooldown's end. o_err: 'unknown',
-- 'concurrent'.
CREATE FUNCTION __SCHEMA__.cooldown(p_dim text, p_now bigint, p_dur bigint, p_skew bigint,
    OUT o_err text, OUT o_before bigint, OUT o_after bigint, OUT o_until bigint)
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
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1],
                           b.cooldown_until_ms, al[2]);
    o_before := r[1];
    o_after := r[1];
    o_until := b.cooldown_until_ms;
    IF p_dur > 0 THEN
        o_after := least(r[1], 0);
        o_until := greatest(b.cooldown_until_ms, al[2] + p_dur);
    END IF;
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2], cooldown_until_ms = o_until,
        version = version + 1 WHERE name = p_dim;
END $$;

-- sync is bucket.Sync at the aligned time: the bucket is refilled and its
-- balance lowered to p_remaining tokens (never raised, never below the
-- floor). o_err: 'unknown', 'concurrent'.
CREATE FUNCTION __SCHEMA__.sync(p_dim text, p_now bigint, p_remaining bigint, p_skew bigint,
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
    r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms, b.tokens, al[1],
                           b.cooldown_until_ms, al[2]);
    o_before := r[1];
    o_after := r[1];
    IF p_remaining * 1000 < r[1] THEN
        o_after := greatest(p_remaining * 1000, __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt));
    END IF;
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2], version = version + 1 WHERE name = p_dim;
END $$;

-- put_bucket creates a bucket (full, with a new incarnation, never cooled)
-- or reconfigures one at the aligned time, keeping its incarnation
-- (bucket.Reconfigure): a reset fills it and ends any cooldown, any other
-- change keeps the cooldown. It returns NULL, or the existing bucket's
-- limit type when the change is refused: to or from concurrent, which only
-- a delete and re-create may do; nothing changes then.
CREATE OR REPLACE FUNCTION __SCHEMA__.put_bucket(p_name text, p_type smallint, p_cap bigint, p_amt bigint, p_per bigint,
    p_cpc bigint, p_debt bigint, p_now bigint, p_reset boolean, p_skew bigint)
RETURNS smallint LANGUAGE plpgsql AS $$
DECLARE
    b record;
    v_now bigint;
    al bigint[];
    r bigint[];
    t bigint;
    u bigint;
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
                u := 0;
            ELSE
                r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms,
                                       b.tokens, al[1], b.cooldown_until_ms, al[2]);
                u := b.cooldown_until_ms;
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
                last_refill_ms = r[2], cooldown_until_ms = u, version = b.version + 1
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
