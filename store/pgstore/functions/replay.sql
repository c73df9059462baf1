-- replay answers an acquisition whose id has a record (r_dims, r_costs,
-- r_expires): the grant it was, with the balances available at the aligned
-- times, when the record holds the same dimensions at the same costs in any
-- order; 'inuse' otherwise. Dimensions are unique within a request and
-- within a record, so equal sizes and inclusion mean equal sets.
-- Version 2's overload, without cooldowns; the one below is the one
-- acquire calls.
CREATE OR REPLACE FUNCTION __SCHEMA__.replay(r_dims text[], r_costs bigint[], r_expires bigint,
    p_dims text[], p_costs bigint[], p_caps bigint[], amts bigint[], pers bigint[], toks bigint[],
    alasts bigint[], ats bigint[],
    OUT o_err text, OUT o_granted boolean, OUT o_recorded boolean, OUT o_retry bigint,
    OUT o_remaining bigint[], OUT o_expires bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF r_dims IS NULL OR cardinality(r_dims) <> cardinality(p_dims) OR EXISTS (
        SELECT 1 FROM unnest(p_dims, p_costs) AS u(d, c)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(r_dims, r_costs) AS v(d, c) WHERE v.d = u.d AND v.c = u.c)) THEN
        o_err := 'inuse'; o_granted := false; o_recorded := false;
        RETURN;
    END IF;
    o_granted := true; o_recorded := true; o_retry := 0; o_expires := r_expires;
    SELECT array_agg((__SCHEMA__.refill(p_caps[k] * 1000, amts[k], pers[k], toks[k], alasts[k], ats[k]))[1] ORDER BY k)
    INTO o_remaining FROM generate_subscripts(p_dims, 1) AS k;
END $$;

-- replay as above, the buckets' cooldown ends (untils) included: the
-- overload acquire calls.
CREATE OR REPLACE FUNCTION __SCHEMA__.replay(r_dims text[], r_costs bigint[], r_expires bigint,
    p_dims text[], p_costs bigint[], p_caps bigint[], amts bigint[], pers bigint[], toks bigint[],
    alasts bigint[], untils bigint[], ats bigint[],
    OUT o_err text, OUT o_granted boolean, OUT o_recorded boolean, OUT o_retry bigint,
    OUT o_remaining bigint[], OUT o_expires bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF r_dims IS NULL OR cardinality(r_dims) <> cardinality(p_dims) OR EXISTS (
        SELECT 1 FROM unnest(p_dims, p_costs) AS u(d, c)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(r_dims, r_costs) AS v(d, c) WHERE v.d = u.d AND v.c = u.c)) THEN
        o_err := 'inuse'; o_granted := false; o_recorded := false;
        RETURN;
    END IF;
    o_granted := true; o_recorded := true; o_retry := 0; o_expires := r_expires;
    SELECT array_agg((__SCHEMA__.refill(p_caps[k] * 1000, amts[k], pers[k], toks[k], alasts[k], untils[k], ats[k]))[1] ORDER BY k)
    INTO o_remaining FROM generate_subscripts(p_dims, 1) AS k;
END $$;
