-- acquire debits every dimension or none. o_err: 'unknown' (o_dim has no
-- bucket), 'cost' (o_dim's cost exceeds its capacity), 'inuse' (p_id has a
-- record for other dimensions or costs); nothing changed then. A retry of
-- a recorded grant (same id, same items) returns that grant, changing
-- nothing. A denial writes only the waiter tickets; a caller more than
-- p_skew behind a refill timestamp is refused before anything is written
-- (o_expires carries its lag, as in version 5). Nothing is granted on a
-- bucket before the end of its cooldown (bucket.Take), nor on a concurrent
-- bucket unless its balance covers the request's cost plus the costs of the
-- live tickets of other requests ahead of the request's place (its earliest
-- live ticket's at_ms, else the decision time; then the id). A denial with p_queue > 0 takes a ticket expiring at now + p_queue
-- on each concurrent dimension at that one place, holding the request's
-- cost there, or renews the one it has keeping its place; a grant deletes the request's tickets. o_ahead is, on
-- a denial, the most live tickets of others ahead on one concurrent item.
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
    aheadcosts bigint[] := array_fill(0::bigint, ARRAY[n]);
    v_aheadcost bigint := 0; -- the costs of the live tickets of others ahead
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
    ac bigint;
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
                SELECT count(*), coalesce(sum(wt.cost), 0) INTO o_ahead, v_aheadcost FROM __SCHEMA__.waiters wt
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
        IF v_t < (c + v_aheadcost) * 1000 OR v_at < v_until THEN
            o_granted := false; o_recorded := false;
            IF v_type = 3 THEN
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> p_dims AND incs[array_position(dims, p_dims[1])] = v_inc;
                w := greatest(CASE WHEN w > o_now AND w - o_now < p_poll THEN w - o_now ELSE p_poll END, 1);
                IF p_queue > 0 THEN
                    INSERT INTO __SCHEMA__.waiters (dim, id, at_ms, expires_ms, cost) VALUES (p_dims[1], p_id, v_place, o_now + p_queue, c)
                    ON CONFLICT (dim, id) DO UPDATE SET expires_ms = excluded.expires_ms, cost = excluded.cost;
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
                    SELECT count(*), coalesce(sum(wt.cost), 0) INTO a, ac FROM __SCHEMA__.waiters wt
                    WHERE wt.dim = p_dims[i] AND wt.expires_ms > o_now AND wt.id <> p_id AND (wt.at_ms, wt.id) < (v_place, p_id);
                    aheads[i] := a; aheadcosts[i] := ac;
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
        IF r[1] >= c + aheadcosts[i] * 1000 AND ats[i] >= untils[i] THEN
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
                INSERT INTO __SCHEMA__.waiters (dim, id, at_ms, expires_ms, cost)
                SELECT u.d, p_id, v_place, o_now + p_queue, u.c FROM unnest(p_dims, o_types, o_costs) AS u(d, ty, c) WHERE u.ty = 3
                ORDER BY u.d
                ON CONFLICT (dim, id) DO UPDATE SET expires_ms = excluded.expires_ms, cost = excluded.cost;
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

-- acquire with version 3's signature (no p_queue), still called by
-- processes of version 3: the one above without a queue of its own.
CREATE OR REPLACE FUNCTION __SCHEMA__.acquire(
    p_dims text[], p_costs bigint[], p_now bigint, p_ttl bigint, p_id uuid,
    p_caller text, p_record boolean, p_poll bigint, p_skew bigint,
    OUT o_err text, OUT o_dim text, OUT o_granted boolean, OUT o_recorded boolean,
    OUT o_now bigint, OUT o_retry bigint, OUT o_types smallint[], OUT o_costs bigint[],
    OUT o_caps bigint[], OUT o_remaining bigint[], OUT o_waits bigint[], OUT o_expires bigint)
LANGUAGE sql AS $$
SELECT x.o_err, x.o_dim, x.o_granted, x.o_recorded, x.o_now, x.o_retry, x.o_types, x.o_costs,
       x.o_caps, x.o_remaining, x.o_waits, x.o_expires
FROM __SCHEMA__.acquire(p_dims, p_costs, p_now, p_ttl, p_id, p_caller, p_record, p_poll, p_skew, 0::bigint) x
$$;
