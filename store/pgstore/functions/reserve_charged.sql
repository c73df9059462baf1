-- reserve_charged is reserve, plus o_charged: each granted item's
-- settlement counter after the debit, read in the same transaction while
-- reserve's row locks are held (NULL on a denial).
CREATE OR REPLACE FUNCTION __SCHEMA__.reserve_charged(
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
