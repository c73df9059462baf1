-- skew_refusal is the refusal of an admission (acquire, reserve) whose
-- caller, at p_now, is more than p_skew ms behind the refill timestamp of
-- one of its time-based buckets (bucket.Align's wait above zero): o_lag is
-- how far behind the furthest such bucket it is (0: not refused, and the
-- other outputs are meaningless), o_remaining each item's balance at its
-- decision time, o_waits bucket.SkewRetry for each such item and 0 for
-- the others, o_retry the longest. Caps, tokens and costs are millitokens.
CREATE OR REPLACE FUNCTION __SCHEMA__.skew_refusal(p_caps bigint[], p_amts bigint[], p_pers bigint[], p_toks bigint[],
    p_lasts bigint[], p_untils bigint[], p_costs bigint[], p_now bigint, p_skew bigint,
    OUT o_lag bigint, OUT o_retry bigint, OUT o_remaining bigint[], OUT o_waits bigint[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n int := cardinality(p_lasts);
    i int;
    v_at bigint;
    max_retry CONSTANT bigint := 3162240000000; -- bucket.MaxRetryMs
BEGIN
    o_lag := 0; o_retry := 0;
    o_remaining := array_fill(0::bigint, ARRAY[n]);
    o_waits := array_fill(0::bigint, ARRAY[n]);
    FOR i IN 1..n LOOP
        IF p_amts[i] > 0 AND p_lasts[i] - p_now > p_skew THEN
            o_lag := greatest(o_lag, p_lasts[i] - p_now);
        END IF;
    END LOOP;
    IF o_lag = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1..n LOOP
        v_at := CASE WHEN p_amts[i] > 0 AND p_now < p_lasts[i] THEN p_lasts[i] ELSE p_now END;
        o_remaining[i] := (__SCHEMA__.refill(p_caps[i], p_amts[i], p_pers[i], p_toks[i], p_lasts[i], p_untils[i], v_at))[1];
        IF p_amts[i] > 0 AND p_lasts[i] - p_now > p_skew THEN
            o_waits[i] := least(greatest(p_lasts[i] - p_skew - p_now,
                __SCHEMA__.retry_in(p_caps[i], p_amts[i], p_pers[i], p_toks[i], p_lasts[i], p_untils[i], v_at, p_costs[i])), max_retry);
            o_retry := greatest(o_retry, o_waits[i]);
        END IF;
    END LOOP;
END $$;
