-- retry_in is bucket.RetryIn on the stored (unrefilled) state. Version 2's
-- overload, without a cooldown; the operations call the one below.
CREATE OR REPLACE FUNCTION __SCHEMA__.retry_in(cap bigint, amt bigint, per bigint, tok bigint, last bigint, now bigint, cost bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e bigint;
    w bigint;
    max_retry CONSTANT bigint := 3162240000000; -- bucket.MaxRetryMs
BEGIN
    IF amt <= 0 OR tok >= cost OR tok >= cap THEN
        RETURN 0;
    END IF;
    e := __SCHEMA__.ceil_mul_div(cost - tok, per, amt);
    IF e > max_retry THEN
        RETURN max_retry;
    END IF;
    w := last + e - now;
    IF w <= 0 THEN
        RETURN 0;
    ELSIF w > max_retry THEN
        RETURN max_retry;
    END IF;
    RETURN w;
END $$;

-- retry_in is bucket.RetryIn on the stored (unrefilled) state: during a
-- cooldown the wait runs to until_ms and then for as long as the bucket
-- takes to earn cost from there.
CREATE OR REPLACE FUNCTION __SCHEMA__.retry_in(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint,
    now bigint, cost bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    e bigint;
    w bigint;
    max_retry CONSTANT bigint := 3162240000000; -- bucket.MaxRetryMs
BEGIN
    IF amt <= 0 THEN
        RETURN 0;
    END IF;
    IF tok >= cost OR tok >= cap THEN
        RETURN least(greatest(until_ms - now, 0), max_retry);
    END IF;
    e := __SCHEMA__.ceil_mul_div(cost - tok, per, amt);
    IF e > max_retry THEN
        RETURN max_retry;
    END IF;
    w := greatest(last, until_ms) + e - now;
    IF w <= 0 THEN
        RETURN 0;
    ELSIF w > max_retry THEN
        RETURN max_retry;
    END IF;
    RETURN w;
END $$;
