-- sync is bucket.Sync at the aligned time: the bucket is refilled and its
-- balance lowered to p_remaining tokens (never raised, never below the
-- floor), the reduction counting in charged. o_err: 'unknown',
-- 'concurrent'.
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
