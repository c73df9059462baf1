-- Sluice PostgreSQL store, schema version 4: reservations and waiter
-- queues. A bucket keeps the latest valid instant of its reservations
-- (bucket.State.Reserved) in reserved_until_ms; a lease record made by a
-- reservation keeps its valid instant in valid_ms (0 for an acquisition);
-- waiters holds the tickets of the waiter queues of concurrent buckets,
-- served in (at_ms, id) order (uuid order is byte order). Three new
-- operation functions, reserve, cancel and dequeue; acquire gains a queue
-- argument and reports the tickets ahead; adjust and put_bucket clamp to
-- the effective floor (bucket.EffectiveFloor) and put_bucket moves the
-- latest valid instant on when it forgives pending reservations.
--
-- Tickets are read and written only while the row of their bucket is
-- locked (FOR UPDATE, in name order), so the queue of a bucket changes
-- atomically with its balance; deleting a bucket deletes its tickets
-- (ON DELETE CASCADE).
--
-- Upgrading in place: the columns are added with constant defaults, which
-- PostgreSQL does without rewriting the tables, so every bucket keeps its
-- balance and reads as never reserved, every lease reads as granted by an
-- acquisition. The functions of version 3 keep their signatures: acquire
-- becomes a wrapper of the new one (no queue of its own, but it does not
-- overtake waiters), adjust and put_bucket are replaced, so processes still
-- running the previous code keep working during a rolling upgrade.
--
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

ALTER TABLE __SCHEMA__.buckets ADD COLUMN reserved_until_ms bigint NOT NULL DEFAULT 0; -- Unix ms, 0 = never
ALTER TABLE __SCHEMA__.leases ADD COLUMN valid_ms bigint NOT NULL DEFAULT 0;           -- Unix ms, 0 = acquisition

CREATE TABLE __SCHEMA__.waiters (
    dim        text COLLATE "C" NOT NULL REFERENCES __SCHEMA__.buckets (name) ON DELETE CASCADE,
    id         uuid   NOT NULL, -- the waiter's lease id
    at_ms      bigint NOT NULL, -- its place: the decision time it first took a ticket
    expires_ms bigint NOT NULL,
    PRIMARY KEY (dim, id)
);
CREATE INDEX waiters_order_idx ON __SCHEMA__.waiters (dim, at_ms, id);

-- reserved_debt is bucket.ReservedDebt: what pending reservations may still
-- owe at now, in millitokens.
CREATE FUNCTION __SCHEMA__.reserved_debt(amt bigint, per bigint, reserved bigint, now bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR reserved <= now THEN 0
            ELSE least(__SCHEMA__.ceil_mul_div(reserved - now, amt, per), 1000000000000000) END
$$;

-- effective_floor is bucket.EffectiveFloor: the floor fl lowered by what
-- reservations owe, never below bucket.MinBalance.
CREATE FUNCTION __SCHEMA__.effective_floor(fl bigint, amt bigint, per bigint, reserved bigint, now bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT greatest(fl - __SCHEMA__.reserved_debt(amt, per, reserved, now), -1000000000000000)
$$;

-- forget_reserved is bucket's forgetReserved: the latest valid instant to
-- keep when a reset or a change of limits forgives pending reservations.
CREATE FUNCTION __SCHEMA__.forget_reserved(cap bigint, amt bigint, per bigint, reserved bigint, now bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN reserved <= now OR amt <= 0 THEN reserved
            ELSE least(reserved + __SCHEMA__.ceil_mul_div(cap, per, amt), 9007199254740991) END
$$;

-- reserve_tokens is bucket.Reserve on the stored state: {tokens, last,
-- reserved} after debiting cost millitokens at now for a reservation valid
-- at valid, or NULL when the balance would fall below bucket.MinBalance
-- (or the bucket does not refill).
CREATE FUNCTION __SCHEMA__.reserve_tokens(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint,
    reserved bigint, now bigint, cost bigint, valid bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    r bigint[];
    debit bigint := cost;
    start bigint;
BEGIN
    IF amt <= 0 THEN
        RETURN NULL;
    END IF;
    r := __SCHEMA__.refill(cap, amt, per, tok, last, until_ms, now);
    start := greatest(r[2], until_ms);
    IF valid > start THEN
        debit := debit + greatest(0, r[1] + least(__SCHEMA__.mul_div(valid - start, amt, per), 4000000000000000) - cap);
    END IF;
    IF r[1] - debit < -1000000000000000 THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY[r[1] - debit, r[2], greatest(reserved, valid)];
END $$;

-- unreserve_tokens is bucket.Unreserve on the stored state: {tokens, last,
-- given back} after cancelling at now a reservation of cost millitokens
-- valid at valid.
CREATE FUNCTION __SCHEMA__.unreserve_tokens(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint,
    reserved bigint, now bigint, cost bigint, valid bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    r bigint[];
    back bigint := cost;
BEGIN
    IF amt <= 0 OR now >= valid OR cost <= 0 OR reserved < valid THEN
        RETURN ARRAY[tok, last, 0];
    END IF;
    IF reserved > valid THEN
        back := cost - __SCHEMA__.ceil_mul_div(reserved - valid, amt, per);
    END IF;
    IF back <= 0 THEN
        RETURN ARRAY[tok, last, 0];
    END IF;
    r := __SCHEMA__.refill(cap, amt, per, tok, last, until_ms, now);
    IF r[1] + back > cap THEN
        back := greatest(cap - r[1], 0);
    END IF;
    RETURN ARRAY[r[1] + back, r[2], back];
END $$;

-- acquire debits every dimension or none. o_err: 'unknown' (o_dim has no
-- bucket), 'cost' (o_dim's cost exceeds its capacity), 'inuse' (p_id has a
-- record for other dimensions or costs); nothing changed then. A retry of
-- a recorded grant (same id, same items) returns that grant, changing
-- nothing. A denial writes only the rebase of a bucket whose last write was
-- more than p_skew ahead, and the waiter tickets. Nothing is granted on a
-- bucket before the end of its cooldown (bucket.Take), nor on a concurrent
-- bucket while a live ticket of another request is ahead of the request's
-- place (its earliest live ticket's at_ms, else the decision time; then the
-- id). A denial with p_queue > 0 takes a ticket expiring at now + p_queue
-- on each concurrent dimension at that one place, or renews the one it has
-- keeping its place; a grant deletes the request's tickets. o_ahead is, on
-- a denial, the most live tickets of others ahead on one concurrent item.
CREATE FUNCTION __SCHEMA__.acquire(
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
        -- A bucket whose last write was more than the maximum skew ahead is
        -- rebased even on a denial, or its refill would never start.
        UPDATE __SCHEMA__.buckets bk SET last_refill_ms = u.al, version = bk.version + 1
        FROM unnest(p_dims, lasts, alasts) AS u(d, l, al) WHERE bk.name = u.d AND u.al <> u.l;
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

-- The version-3 acquire, still called by processes running the previous
-- code during a rolling upgrade: the new one without a queue of its own.
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

-- adjust settles an estimate on one requests or tokens item. o_err, in
-- order of precedence: 'unknown', 'concurrent', 'nolease' (recorded lease
-- without record), 'notinlease', 'expired' (a refund on an expired lease),
-- 'refund' (larger than o_held, what the lease holds). A charge is applied
-- even on an expired lease and raises the held cost by the whole tokens
-- actually charged (store.HeldAfter). During a cooldown a refund lifts the
-- balance at most to zero; the floor is the effective floor, and a balance
-- already below it is never raised by the clamp (bucket.Adjust).
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
    fl := least(__SCHEMA__.effective_floor(__SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt),
                                           b.refill_amount * 1000, b.refill_period_ms, b.reserved_until_ms, al[2]), r[1]);
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

-- put_bucket creates a bucket (full, with a new incarnation, never cooled
-- nor reserved) or reconfigures one at the aligned time, keeping its
-- incarnation and its waiter queue (bucket.Reconfigure): a reset fills it
-- and ends any cooldown, any other change keeps the cooldown and clamps to
-- the new effective floor; a reset, or a change of capacity or rate, with
-- reservations pending moves the latest valid instant on (so that
-- cancelling them gives nothing back). It returns NULL, or the existing
-- bucket's limit type when the change is refused: to or from concurrent,
-- which only a delete and re-create may do; nothing changes then.
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
    v_res bigint;
BEGIN
    LOOP
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_name FOR UPDATE;
        v_now := coalesce(p_now, __SCHEMA__.now_ms());
        IF FOUND THEN
            IF (b.limit_type = 3) <> (p_type = 3) THEN
                RETURN b.limit_type;
            END IF;
            al := __SCHEMA__.align(b.refill_amount * 1000, b.last_refill_ms, v_now, p_skew);
            v_res := b.reserved_until_ms;
            IF p_reset THEN
                r := ARRAY[p_cap * 1000, al[2]];
                t := r[1];
                u := 0;
                v_res := __SCHEMA__.forget_reserved(p_cap * 1000, p_amt * 1000, p_per, v_res, al[2]);
            ELSE
                r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms,
                                       b.tokens, al[1], b.cooldown_until_ms, al[2]);
                u := b.cooldown_until_ms;
                IF b.limit_type = 3 THEN
                    t := least(r[1] + (p_cap - b.capacity) * 1000, p_cap * 1000);
                ELSE
                    t := least(greatest(r[1], __SCHEMA__.effective_floor(__SCHEMA__.floor_milli(p_type, p_cap, p_debt),
                                                                         p_amt * 1000, p_per, v_res, al[2])), p_cap * 1000);
                    IF b.capacity <> p_cap OR b.refill_amount <> p_amt OR b.refill_period_ms <> p_per THEN
                        v_res := __SCHEMA__.forget_reserved(p_cap * 1000, p_amt * 1000, p_per, v_res, al[2]);
                    END IF;
                END IF;
            END IF;
            UPDATE __SCHEMA__.buckets
            SET limit_type = p_type, capacity = p_cap, refill_amount = p_amt, refill_period_ms = p_per,
                cost_per_call = p_cpc, max_debt = p_debt,
                tokens = t,
                last_refill_ms = r[2], cooldown_until_ms = u, reserved_until_ms = v_res, version = b.version + 1
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

-- reserve debits every requests or tokens dimension or none, even when a
-- balance is short (bucket.Reserve), provided the reservation is valid
-- within p_max_wait ms: o_valid is the latest instant at which each
-- item's balance would have covered it, cooldowns included; o_wait runs
-- to it from the decision time. o_err: 'unknown', 'concurrent' (o_dim is a
-- concurrent dimension), 'cost', 'inuse'; nothing changed then. A wait
-- longer than p_max_wait, or a balance that would fall below
-- bucket.MinBalance (then o_wait is the wait until it would not), is a
-- denial that writes only the rebase of a bucket more than p_skew ahead.
-- With p_record a lease record with valid_ms is written, expiring at
-- o_valid + p_ttl; a retry with the same id and items is answered as what
-- its record says.
CREATE FUNCTION __SCHEMA__.reserve(
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
            -- A bucket whose last write was more than the maximum skew ahead
            -- is rebased even on a denial.
            UPDATE __SCHEMA__.buckets bk SET last_refill_ms = u.al, version = bk.version + 1
            FROM unnest(p_dims, lasts, alasts) AS u(d, l, al) WHERE bk.name = u.d AND u.al <> u.l;
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

-- cancel gives a reservation's tokens back (bucket.Unreserve on each
-- requests or tokens item, at the aligned time). A recorded reservation
-- (p_recorded) is read from its record, which is deleted (o_cancelled;
-- o_err 'notres' when the record is a lease granted by an acquisition,
-- nothing changed then), and gives back only into the buckets it was made
-- on (same incarnation); otherwise p_dims, p_costs (tokens the lease holds)
-- and p_valid describe it, and o_cancelled says it was still pending.
-- o_dims and o_amounts list what went back (millitokens), in the
-- reservation's order. The lease row is locked before the bucket rows.
CREATE FUNCTION __SCHEMA__.cancel(p_id uuid, p_recorded boolean, p_dims text[], p_costs bigint[], p_valid bigint,
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

-- dequeue deletes p_id's tickets (and the dead ones) from the waiter
-- queues of the named dimensions, their bucket rows locked in name order.
CREATE FUNCTION __SCHEMA__.dequeue(p_dims text[], p_id uuid, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint;
BEGIN
    PERFORM 1 FROM __SCHEMA__.buckets WHERE name = ANY (p_dims) AND limit_type = 3 ORDER BY name FOR UPDATE;
    v_now := coalesce(p_now, __SCHEMA__.now_ms());
    DELETE FROM __SCHEMA__.waiters WHERE dim = ANY (p_dims) AND (id = p_id OR expires_ms <= v_now);
END $$;
