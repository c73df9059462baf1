-- Sluice PostgreSQL store, version 3: bucket incarnations.
--
-- A bucket deleted and re-created under the same name is a different bucket:
-- leases granted on the old one must not restore into the new one (it never
-- lent those slots). Every bucket row gets an incarnation, a number drawn
-- from a sequence when the row is inserted and kept by reconfiguration;
-- acquire copies the incarnation of each dimension into the lease record
-- (incs, parallel to dims), and release and reconcile restore only into a
-- bucket whose incarnation matches. A lease whose buckets are all gone or
-- re-created is an orphan.
--
-- put_bucket also changes: a concurrent bucket reconfigured to a concurrent
-- bucket without reset moves its balance by the change in capacity, so that
-- "capacity minus what is held" stays true (possibly below zero).
--
-- Function signatures are unchanged, so processes running the previous code
-- keep working against this schema.

ALTER TABLE __SCHEMA__.buckets ADD COLUMN incarnation bigserial NOT NULL;

ALTER TABLE __SCHEMA__.leases ADD COLUMN incs bigint[];
-- Existing leases are attributed to the buckets that exist now (NULL where
-- the bucket is gone: those items are orphans). A lease granted before a
-- delete and re-create that happened before this migration cannot be told
-- apart any more.
UPDATE __SCHEMA__.leases l
SET incs = (SELECT array_agg(b.incarnation ORDER BY u.o)
            FROM unnest(l.dims) WITH ORDINALITY AS u(d, o)
            LEFT JOIN __SCHEMA__.buckets b ON b.name = u.d);
ALTER TABLE __SCHEMA__.leases ALTER COLUMN incs SET NOT NULL;


-- acquire: as in version 2, and the lease record keeps each dimension's
-- bucket incarnation. The wait of a denied concurrent item looks only at
-- leases that hold a slot of this very bucket.
CREATE OR REPLACE FUNCTION __SCHEMA__.acquire(
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
    v_incs bigint[] := array_fill(0::bigint, ARRAY[n]);
    avail bigint[] := array_fill(0::bigint, ARRAY[n]);
    conc boolean := false;
    v_type smallint;
    v_cap bigint;
    v_amt bigint;
    v_per bigint;
    v_tok bigint;
    v_last bigint;
    v_inc bigint;
    a bigint;
BEGIN
    IF n = 1 THEN
        -- The common case, with scalars only: one bucket, bucket.Take inline.
        SELECT bk.limit_type, bk.capacity, bk.refill_amount * 1000, bk.refill_period_ms,
               CASE WHEN p_costs[1] <> 0 THEN p_costs[1] WHEN bk.cost_per_call = 0 THEN 1 ELSE bk.cost_per_call END,
               bk.tokens, bk.last_refill_ms, bk.incarnation
        INTO v_type, v_cap, v_amt, v_per, c, v_tok, v_last, v_inc
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
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> p_dims AND incs[array_position(dims, p_dims[1])] = v_inc;
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
            INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs, incs)
            VALUES (p_id, p_caller, o_now, o_now + p_ttl, p_dims, o_costs, ARRAY[v_inc])
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
                SELECT min(expires_ms) INTO w FROM __SCHEMA__.leases
                WHERE dims @> ARRAY[p_dims[i]] AND incs[array_position(dims, p_dims[i])] = v_incs[i];
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
        INSERT INTO __SCHEMA__.leases (id, caller, created_ms, expires_ms, dims, costs, incs)
        VALUES (p_id, p_caller, o_now, o_now + p_ttl, p_dims, o_costs, v_incs)
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

-- put_bucket creates a bucket (full, with a new incarnation) or reconfigures
-- one, keeping its incarnation. On reconfiguration: p_reset fills it to the
-- new capacity; a concurrent bucket that stays concurrent moves its balance
-- by the change in capacity (capacity minus what is held stays true; the
-- balance may go below zero) and is capped at the new capacity; any other
-- bucket keeps its balance refilled under the old limits and clamped to the
-- new floor and capacity.
CREATE OR REPLACE FUNCTION __SCHEMA__.put_bucket(p_name text, p_type smallint, p_cap bigint, p_amt bigint, p_per bigint,
    p_cpc bigint, p_debt bigint, p_now bigint, p_reset boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    b record;
    v_now bigint;
    r bigint[];
    t bigint;
BEGIN
    LOOP
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_name FOR UPDATE;
        v_now := coalesce(p_now, __SCHEMA__.now_ms());
        IF FOUND THEN
            IF p_reset THEN
                r := ARRAY[p_cap * 1000, v_now];
                t := r[1];
            ELSE
                r := __SCHEMA__.refill(b.capacity * 1000, b.refill_amount * 1000, b.refill_period_ms,
                                       b.tokens, b.last_refill_ms, v_now);
                IF b.limit_type = 3 AND p_type = 3 THEN
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

-- reconcile: as in version 2, but an item is live only when its bucket is
-- the very one the lease was granted on (same incarnation); a lease with no
-- live item is an orphan.
CREATE OR REPLACE FUNCTION __SCHEMA__.reconcile(p_now bigint, p_limit int,
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
