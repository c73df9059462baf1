-- Sluice PostgreSQL store, schema version 5: clocks that disagree never
-- earn a bucket the same refill twice. A bucket's refill timestamp
-- (last_refill_ms) never moves backwards, whoever asks: align (a port of
-- bucket.Align) decides at the refill timestamp for any caller behind it,
-- instead of rebasing the bucket to a caller more than the maximum skew
-- behind. Such a caller's acquire and reserve are refused, changing
-- nothing (skew_refusal, a port of bucket.SkewRetry): the denial's waits
-- run until its clock is within the skew, and o_expires, NULL on any other
-- denial, holds how many ms it is behind. Its other operations (adjust,
-- penalize, cooldown, sync, cancel, put_bucket) apply at the refill
-- timestamp through align. With the server's clock (p_now NULL) no caller
-- is behind by more than the skew.
--
-- Upgrading in place: no table changes; the functions keep their
-- signatures, so processes still running the previous code keep working
-- during a rolling upgrade (they read o_expires only on a grant).
--
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

-- align is bucket.Align's decision time: {last, now to decide at}; the
-- refill timestamp last is kept. amt is the refill amount (0 for
-- concurrent buckets, which never align); skew is unused here (see
-- skew_refusal).
CREATE OR REPLACE FUNCTION __SCHEMA__.align(amt bigint, last bigint, now bigint, skew bigint)
RETURNS bigint[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR now >= last THEN ARRAY[last, now]
            ELSE ARRAY[last, last] END
$$;

-- skew_refusal is the refusal of an admission (acquire, reserve) whose
-- caller, at p_now, is more than p_skew ms behind the refill timestamp of
-- one of its time-based buckets (bucket.Align's wait above zero): o_lag is
-- how far behind the furthest such bucket it is (0: not refused, and the
-- other outputs are meaningless), o_remaining each item's balance at its
-- decision time, o_waits bucket.SkewRetry for each such item and 0 for
-- the others, o_retry the longest. Caps, tokens and costs are millitokens.
CREATE FUNCTION __SCHEMA__.skew_refusal(p_caps bigint[], p_amts bigint[], p_pers bigint[], p_toks bigint[],
    p_lasts bigint[], p_untils bigint[], p_costs bigint[], p_now bigint, p_skew bigint,
    OUT o_lag bigint, OUT o_retry bigint, OUT o_remaining bigint[], OUT o_waits bigint[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n int := cardinality(p_lasts);
    i int;
    v_at bigint;
    max_retry CONSTANT bigint := 3162240000000; -- bucket.MaxRetryMs
BEGIN
    o_lag := 0; o_retry := 0;
    o_remaining := array_fill(0::bigint, ARRAY[n]);
    o_waits := array_fill(0::bigint, ARRAY[n]);
    FOR i IN 1..n LOOP
        IF p_amts[i] > 0 AND p_lasts[i] - p_now > p_skew THEN
            o_lag := greatest(o_lag, p_lasts[i] - p_now);
        END IF;
    END LOOP;
    IF o_lag = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1..n LOOP
        v_at := CASE WHEN p_amts[i] > 0 AND p_now < p_lasts[i] THEN p_lasts[i] ELSE p_now END;
        o_remaining[i] := (__SCHEMA__.refill(p_caps[i], p_amts[i], p_pers[i], p_toks[i], p_lasts[i], p_untils[i], v_at))[1];
        IF p_amts[i] > 0 AND p_lasts[i] - p_now > p_skew THEN
            o_waits[i] := least(greatest(p_lasts[i] - p_skew - p_now,
                __SCHEMA__.retry_in(p_caps[i], p_amts[i], p_pers[i], p_toks[i], p_lasts[i], p_untils[i], v_at, p_costs[i])), max_retry);
            o_retry := greatest(o_retry, o_waits[i]);
        END IF;
    END LOOP;
END $$;

-- acquire is version 4's, but for a caller more than p_skew behind a
-- refill timestamp: refused (see skew_refusal) after the check for a
-- retry of a recorded grant, before the waiter queues are read; a denial
-- writes no rebase.
CREATE OR REPLACE FUNCTION __SCHEMA__.acquire(
    p_dims text[], p_costs bigint[], p_now bigint, p_ttl bigint, p_id uuid,
    p_caller text, p_record boolean, p_poll bigint, p_skew bigint, p_queue bigint,
    OUT o_err text, OUT o_dim text, OUT o_granted boolean, OUT o_recorded boolean,
    OUT o_now bigint, OUT o_retry bigint, OUT o_types smallint[], OUT o_costs bigint[],
    OUT o_caps bigint[], OUT o_remaining bigint[], OUT o_waits bigint[], OUT o_expires bigint,
    OUT o_ahead int)
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
    aheads int[] := array_fill(0, ARRAY[n]);
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
    v_tickets bigint := 0; -- live tickets in the request's queues
    v_dead bigint := 0;
    v_place bigint;
    a bigint;
    v_lag bigint;
BEGIN
    o_ahead := 0;
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
        -- bucket.Align: the refill timestamp never moves backwards.
        v_alast := v_last; v_at := o_now;
        IF v_amt > 0 AND o_now < v_last THEN
            v_at := v_last;
        END IF;
        SELECT dims, costs, expires_ms INTO l FROM __SCHEMA__.leases WHERE id = p_id;
        IF FOUND THEN
            SELECT * INTO o_err, o_granted, o_recorded, o_retry, o_remaining, o_expires
            FROM __SCHEMA__.replay(l.dims, l.costs, l.expires_ms, p_dims, o_costs, o_caps,
                                   ARRAY[v_amt], ARRAY[v_per], ARRAY[v_tok], ARRAY[v_alast], ARRAY[v_until], ARRAY[v_at]);
            RETURN;
        END IF;
        IF v_amt > 0 AND v_last - o_now > p_skew THEN
            -- Too far behind the refill timestamp: refused, nothing changes.
            SELECT * INTO v_lag, o_retry, o_remaining, o_waits
            FROM __SCHEMA__.skew_refusal(ARRAY[v_cap * 1000], ARRAY[v_amt], ARRAY[v_per], ARRAY[v_tok], ARRAY[v_last],
                                         ARRAY[v_until], ARRAY[c * 1000], o_now, p_skew);
            o_granted := false; o_recorded := false; o_expires := v_lag;
            RETURN;
        END IF;
        IF v_type = 3 THEN
            -- The waiter queue: the request's place and the live tickets
            -- of others ahead of it.
            SELECT count(*) FILTER (WHERE wt.expires_ms > o_now), count(*) FILTER (WHERE wt.expires_ms <= o_now),
                   coalesce(min(wt.at_ms) FILTER (WHERE wt.id = p_id AND wt.expires_ms > o_now), o_now)
            INTO v_tickets, v_dead, v_place FROM __SCHEMA__.waiters wt WHERE wt.dim = p_dims[1];
            IF v_dead > 0 THEN
                -- Dead tickets go whenever a request looks at the queue.
                DELETE FROM __SCHEMA__.waiters WHERE dim = p_dims[1] AND expires_ms <= o_now;
            END IF;
            IF v_tickets > 0 THEN
                SELECT count(*) INTO o_ahead FROM __SCHEMA__.waiters wt
                WHERE wt.dim = p_dims[1] AND wt.expires_ms > o_now AND wt.id <> p_id AND (wt.at_ms, wt.id) < (v_place, p_id);
            END IF;
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
        IF v_t < c * 1000 OR v_at < v_until OR o_ahead > 0 THEN
            o_granted := false; o_recorded := false;
            IF v_type = 3 THEN
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> p_dims AND incs[array_position(dims, p_dims[1])] = v_inc;
                w := greatest(CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END, 1);
                IF p_queue > 0 THEN
                    INSERT INTO __SCHEMA__.waiters (dim, id, at_ms, expires_ms) VALUES (p_dims[1], p_id, v_place, o_now + p_queue)
                    ON CONFLICT (dim, id) DO UPDATE SET expires_ms = excluded.expires_ms;
                END IF;
            ELSE
                w := __SCHEMA__.retry_in(v_cap * 1000, v_amt, v_per, v_tok, v_alast, v_until, v_at, c * 1000);
            END IF;
            o_retry := w; o_waits := ARRAY[w]; o_remaining := ARRAY[v_t];
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
        IF v_tickets > 0 THEN
            DELETE FROM __SCHEMA__.waiters WHERE dim = p_dims[1] AND id = p_id;
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
    IF EXISTS (SELECT 1 FROM unnest(amts, lasts) AS u(a, la) WHERE u.a > 0 AND u.la - o_now > p_skew) THEN
        -- Too far behind a refill timestamp: refused, nothing changes.
        SELECT * INTO v_lag, o_retry, o_remaining, o_waits
        FROM __SCHEMA__.skew_refusal((SELECT array_agg(u.cv * 1000 ORDER BY u.k) FROM unnest(o_caps) WITH ORDINALITY AS u(cv, k)),
                                     amts, pers, toks, lasts, untils,
                                     (SELECT array_agg(u.cv * 1000 ORDER BY u.k) FROM unnest(o_costs) WITH ORDINALITY AS u(cv, k)),
                                     o_now, p_skew);
        o_granted := false; o_recorded := false; o_expires := v_lag;
        RETURN;
    END IF;
    IF conc THEN
        -- The waiter queues: one place for the request in all of them.
        SELECT count(*) FILTER (WHERE wt.expires_ms > o_now), count(*) FILTER (WHERE wt.expires_ms <= o_now),
               coalesce(min(wt.at_ms) FILTER (WHERE wt.id = p_id AND wt.expires_ms > o_now), o_now)
        INTO v_tickets, v_dead, v_place FROM __SCHEMA__.waiters wt WHERE wt.dim = ANY (p_dims);
        IF v_dead > 0 THEN
            DELETE FROM __SCHEMA__.waiters WHERE dim = ANY (p_dims) AND expires_ms <= o_now;
        END IF;
        IF v_tickets > 0 THEN
            FOR i IN 1..n LOOP
                IF o_types[i] = 3 THEN
                    SELECT count(*) INTO a FROM __SCHEMA__.waiters wt
                    WHERE wt.dim = p_dims[i] AND wt.expires_ms > o_now AND wt.id <> p_id AND (wt.at_ms, wt.id) < (v_place, p_id);
                    aheads[i] := a;
                END IF;
            END LOOP;
        END IF;
    END IF;
    o_granted := true;
    o_retry := 0;
    FOR i IN 1..n LOOP
        c := o_costs[i] * 1000;
        r := __SCHEMA__.refill(o_caps[i] * 1000, amts[i], pers[i], toks[i], alasts[i], untils[i], ats[i]);
        avail[i] := r[1];
        IF r[1] >= c AND ats[i] >= untils[i] AND aheads[i] = 0 THEN
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
        IF conc THEN
            SELECT max(x) INTO o_ahead FROM unnest(aheads, o_types) AS u(x, ty) WHERE ty = 3;
            IF p_queue > 0 THEN
                INSERT INTO __SCHEMA__.waiters (dim, id, at_ms, expires_ms)
                SELECT u.d, p_id, v_place, o_now + p_queue FROM unnest(p_dims, o_types) AS u(d, ty) WHERE u.ty = 3
                ORDER BY u.d
                ON CONFLICT (dim, id) DO UPDATE SET expires_ms = excluded.expires_ms;
            END IF;
        END IF;
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
    IF v_tickets > 0 THEN
        DELETE FROM __SCHEMA__.waiters WHERE dim = ANY (p_dims) AND id = p_id;
    END IF;
    o_expires := o_now + p_ttl;
    UPDATE __SCHEMA__.buckets bk SET tokens = u.t, last_refill_ms = u.l, version = bk.version + 1
    FROM unnest(p_dims, ntoks, nlasts) AS u(d, t, l) WHERE bk.name = u.d;
END $$;

-- reserve is version 4's, but for a caller more than p_skew behind a
-- refill timestamp: refused (see skew_refusal) after the check for a
-- retry of a recorded reservation; a denial writes no rebase.
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
