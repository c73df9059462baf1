-- penalize refills a requests or tokens bucket to the aligned time and
-- multiplies a positive balance by p_factor/1000, counting the reduction
-- in charged. o_err: 'unknown', 'concurrent'.
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
