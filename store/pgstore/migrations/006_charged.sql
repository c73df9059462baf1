-- Version 6: the settlement counter (bucket.State.Charged) in charged: the
-- wrapping net change, in millitokens, that settlements after the fact
-- made to a bucket's balance (adjust's applied change, sync's and
-- penalize's reduction, cooldown's drop plus the refill it forgoes). A
-- reservation reads it with its debit (reserve_charged), and its caller
-- reads it again at the valid instant (the peek query): debt settled in
-- between is waited out (bucket.ChargedSince, bucket.ChargeDelay).
-- Existing buckets start at 0; only differences between two readings mean
-- anything. adjust, penalize, cooldown and sync keep their signatures, so
-- the previous code runs unchanged on this schema; reserve is unchanged,
-- and reserve_charged wraps it.

ALTER TABLE __SCHEMA__.buckets ADD COLUMN charged bigint NOT NULL DEFAULT 0;

-- wrap_charged is bucket.WrapCharged: c brought into [-2^51, 2^51) modulo
-- 2^52.
CREATE FUNCTION __SCHEMA__.wrap_charged(c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT ((c + 2251799813685248) % 4503599627370496 + 4503599627370496) % 4503599627370496 - 2251799813685248
$$;

-- cooldown_forgone is bucket's cooldownForgone: the refill (amt
-- millitokens per per ms) a cooldown until p_until, started at p_now on a
-- bucket whose cooldown ends at p_old, forgoes; at most 2^50.
CREATE FUNCTION __SCHEMA__.cooldown_forgone(amt bigint, per bigint, p_old bigint, p_now bigint, p_until bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR p_until <= greatest(p_now, p_old) THEN 0
            ELSE least(__SCHEMA__.ceil_mul_div(p_until - greatest(p_now, p_old), amt, per), 1125899906842624) END
$$;

-- adjust is version 4's, counting the applied change.
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
    UPDATE __SCHEMA__.buckets SET tokens = t, last_refill_ms = r[2], charged = __SCHEMA__.wrap_charged(charged + o_applied),
        version = version + 1 WHERE name = p_dim;
    IF p_recorded THEN
        UPDATE __SCHEMA__.leases SET costs[k] = o_held WHERE id = p_id;
    END IF;
END $$;

-- penalize is version 3's, counting the reduction.
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
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2],
        charged = __SCHEMA__.wrap_charged(charged + o_before - o_after), version = version + 1 WHERE name = p_dim;
END $$;

-- cooldown is version 3's, counting the drop and the forgone refill.
CREATE OR REPLACE FUNCTION __SCHEMA__.cooldown(p_dim text, p_now bigint, p_dur bigint, p_skew bigint,
    OUT o_err text, OUT o_before bigint, OUT o_after bigint, OUT o_until bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
    al bigint[];
    r bigint[];
    v_charge bigint := 0;
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
        -- The balance it drops and the refill it forgoes (bucket.Cooldown).
        v_charge := greatest(r[1], 0) + __SCHEMA__.cooldown_forgone(b.refill_amount * 1000, b.refill_period_ms,
                                                                    b.cooldown_until_ms, al[2], al[2] + p_dur);
    END IF;
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2], cooldown_until_ms = o_until,
        charged = __SCHEMA__.wrap_charged(charged + v_charge), version = version + 1 WHERE name = p_dim;
END $$;

-- sync is version 3's, counting the reduction.
CREATE OR REPLACE FUNCTION __SCHEMA__.sync(p_dim text, p_now bigint, p_remaining bigint, p_skew bigint,
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
    UPDATE __SCHEMA__.buckets SET tokens = o_after, last_refill_ms = r[2],
        charged = __SCHEMA__.wrap_charged(charged + o_before - o_after), version = version + 1 WHERE name = p_dim;
END $$;

-- reserve_charged is reserve, plus o_charged: each granted item's
-- settlement counter after the debit, read in the same transaction while
-- reserve's row locks are held (NULL on a denial).
CREATE FUNCTION __SCHEMA__.reserve_charged(
    p_dims text[], p_costs bigint[], p_now bigint, p_ttl bigint, p_id uuid,
    p_caller text, p_record boolean, p_max_wait bigint, p_skew bigint,
    OUT o_err text, OUT o_dim text, OUT o_granted boolean, OUT o_recorded boolean,
    OUT o_now bigint, OUT o_wait bigint, OUT o_valid bigint, OUT o_expires bigint,
    OUT o_types smallint[], OUT o_costs bigint[], OUT o_caps bigint[], OUT o_remaining bigint[], OUT o_waits bigint[],
    OUT o_charged bigint[])
LANGUAGE plpgsql AS $$
BEGIN
    SELECT * INTO o_err, o_dim, o_granted, o_recorded, o_now, o_wait, o_valid, o_expires,
                  o_types, o_costs, o_caps, o_remaining, o_waits
    FROM __SCHEMA__.reserve(p_dims, p_costs, p_now, p_ttl, p_id, p_caller, p_record, p_max_wait, p_skew);
    IF o_err IS NULL AND o_granted THEN
        SELECT array_agg(bk.charged ORDER BY u.k) INTO o_charged
        FROM unnest(p_dims) WITH ORDINALITY AS u(d, k) JOIN __SCHEMA__.buckets bk ON bk.name = u.d;
    END IF;
END $$;
