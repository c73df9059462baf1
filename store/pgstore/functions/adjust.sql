-- adjust settles an estimate on one requests or tokens item. o_err, in
-- order of precedence: 'unknown', 'concurrent', 'nolease' (recorded lease
-- without record), 'notinlease', 'expired' (a refund on an expired lease),
-- 'refund' (larger than o_held, what the lease holds). A charge is applied
-- even on an expired lease and raises the held cost by the whole tokens
-- actually charged (store.HeldAfter). During a cooldown a refund lifts the
-- balance at most to zero; the floor is the effective floor, and a balance
-- already below it is never raised by the clamp (bucket.Adjust). The
-- applied change is added to the settlement counter, charged.
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
    -- Debt is never forgiven: one charge goes at most the floor's depth
    -- below zero, or below the balance when it is already in debt.
    fl := least(__SCHEMA__.effective_floor(__SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt),
                                           b.refill_amount * 1000, b.refill_period_ms, b.reserved_until_ms, al[2]), r[1],
                greatest(least(r[1], 0) + __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt), -1000000000000000));
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
