-- put_bucket_if is put_bucket under a condition: p_cond 0 none, 1 create
-- only if absent, 2 only if the bucket exists with the configuration
-- p_m_* (store.SameConfig: type, capacity, refill amount and period, the
-- effective debt floor in millitokens and the effective cost per call). It
-- returns what put_bucket returns (NULL, or the existing limit type when a
-- change to or from concurrent is refused), or -2 when the condition
-- fails with a bucket present, -3 when it fails with none; nothing
-- changes then. Version 8's overload, kept for processes of earlier
-- versions; the one below adds p_empty.
CREATE OR REPLACE FUNCTION __SCHEMA__.put_bucket_if(p_name text, p_type smallint, p_cap bigint, p_amt bigint, p_per bigint,
    p_cpc bigint, p_debt bigint, p_now bigint, p_reset boolean, p_skew bigint,
    p_cond smallint, p_m_type smallint, p_m_cap bigint, p_m_amt bigint, p_m_per bigint, p_m_floor bigint,
    p_m_cost bigint)
RETURNS smallint LANGUAGE plpgsql AS $$
DECLARE
    b record;
BEGIN
    IF p_cond = 1 THEN
        INSERT INTO __SCHEMA__.buckets (name, limit_type, capacity, refill_amount, refill_period_ms,
                                        cost_per_call, max_debt, tokens, last_refill_ms)
        VALUES (p_name, p_type, p_cap, p_amt, p_per, p_cpc, p_debt, p_cap * 1000,
                coalesce(p_now, __SCHEMA__.now_ms()))
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        RETURN -2;
    END IF;
    IF p_cond = 2 THEN
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_name FOR UPDATE;
        IF NOT FOUND THEN
            RETURN -3;
        END IF;
        IF b.limit_type <> p_m_type OR b.capacity <> p_m_cap OR b.refill_amount <> p_m_amt
           OR b.refill_period_ms <> p_m_per
           OR __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt) <> p_m_floor
           OR (CASE WHEN b.cost_per_call = 0 THEN 1 ELSE b.cost_per_call END) <> p_m_cost THEN
            RETURN -2;
        END IF;
    END IF;
    RETURN __SCHEMA__.put_bucket(p_name, p_type, p_cap, p_amt, p_per, p_cpc, p_debt, p_now, p_reset, p_skew);
END $$;

-- put_bucket_if is put_bucket under a condition, creating a missing bucket
-- empty when p_empty: p_cond 0 none, 1 create only if absent, 2 only if
-- the bucket exists with the configuration p_m_* (store.SameConfig: type,
-- capacity, refill amount and period, the effective debt floor in
-- millitokens and the effective cost per call). It returns what put_bucket
-- returns (NULL, or the existing limit type when a change to or from
-- concurrent is refused), or -2 when the condition fails with a bucket
-- present, -3 when it fails with none; nothing changes then. The row lock
-- taken on an existing bucket is held through put_bucket, and a creation
-- that loses a race to another one starts over, so the check and the
-- write are one atomic step.
CREATE OR REPLACE FUNCTION __SCHEMA__.put_bucket_if(p_name text, p_type smallint, p_cap bigint, p_amt bigint,
    p_per bigint, p_cpc bigint, p_debt bigint, p_now bigint, p_reset boolean, p_skew bigint,
    p_cond smallint, p_m_type smallint, p_m_cap bigint, p_m_amt bigint, p_m_per bigint, p_m_floor bigint,
    p_m_cost bigint, p_empty boolean)
RETURNS smallint LANGUAGE plpgsql AS $$
DECLARE
    b record;
BEGIN
    LOOP
        SELECT * INTO b FROM __SCHEMA__.buckets WHERE name = p_name FOR UPDATE;
        IF FOUND THEN
            IF p_cond = 1 THEN
                RETURN -2;
            END IF;
            IF p_cond = 2 AND (b.limit_type <> p_m_type OR b.capacity <> p_m_cap OR b.refill_amount <> p_m_amt
               OR b.refill_period_ms <> p_m_per
               OR __SCHEMA__.floor_milli(b.limit_type, b.capacity, b.max_debt) <> p_m_floor
               OR (CASE WHEN b.cost_per_call = 0 THEN 1 ELSE b.cost_per_call END) <> p_m_cost) THEN
                RETURN -2;
            END IF;
            RETURN __SCHEMA__.put_bucket(p_name, p_type, p_cap, p_amt, p_per, p_cpc, p_debt, p_now, p_reset, p_skew);
        END IF;
        IF p_cond = 2 THEN
            RETURN -3;
        END IF;
        INSERT INTO __SCHEMA__.buckets (name, limit_type, capacity, refill_amount, refill_period_ms,
                                        cost_per_call, max_debt, tokens, last_refill_ms)
        VALUES (p_name, p_type, p_cap, p_amt, p_per, p_cpc, p_debt,
                CASE WHEN p_empty AND p_type <> 3 THEN 0 ELSE p_cap * 1000 END,
                coalesce(p_now, __SCHEMA__.now_ms()))
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        -- Another transaction created it first: decide again on that one.
    END LOOP;
END $$;
