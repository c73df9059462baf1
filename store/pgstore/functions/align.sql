-- align is bucket.Align's decision time: {last, now to decide at}; the
-- refill timestamp last is kept. amt is the refill amount (0 for
-- concurrent buckets, which never align); skew is unused here (see
-- skew_refusal).
CREATE OR REPLACE FUNCTION __SCHEMA__.align(amt bigint, last bigint, now bigint, skew bigint)
RETURNS bigint[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN amt <= 0 OR now >= last THEN ARRAY[last, now]
            ELSE ARRAY[last, last] END
$$;
