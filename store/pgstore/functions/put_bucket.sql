-- put_bucket creates a bucket (full, with a new incarnation, never cooled
-- nor reserved) or reconfigures one at the aligned time, keeping its
-- incarnation and its waiter queue (bucket.Reconfigure): a reset fills it
-- and ends any cooldown, any other change keeps the cooldown and clamps to
-- the new capacity, never raising a balance (a debt is never forgiven); a
-- reset, or a change of capacity or rate, with reservations pending moves the latest valid instant on (so that
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
                    t := least(r[1], p_cap * 1000);
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
