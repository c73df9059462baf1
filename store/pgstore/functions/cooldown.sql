-- cooldown is bucket.Cooldown at the aligned time: the bucket is refilled,
-- a positive balance drops to zero, and nothing is granted before the
-- aligned time plus p_dur ms (a running cooldown that ends later is kept);
-- from then on the bucket earns at its refill rate. A p_dur at or below
-- zero only refills. The drop and the refill it forgoes count in charged.
-- o_until is the cooldown's end. o_err: 'unknown', 'concurrent'.
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
