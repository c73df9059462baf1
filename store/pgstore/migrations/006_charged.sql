-- Version 6: the settlement counter (bucket.State.Charged) in charged: the
-- wrapping net change, in millitokens, that settlements after the fact
-- made to a bucket's balance (adjust's applied change, sync's and
-- penalize's reduction, cooldown's drop plus the refill it forgoes). A
-- reservation reads it with its debit (reserve_charged), and its caller
-- reads it again at the valid instant (the peek query): debt settled in
-- between is waited out (bucket.ChargedSince, bucket.ChargeDelay).
-- Existing buckets start at 0; only differences between two readings mean
-- anything. adjust, penalize, cooldown and sync keep their signatures, so
-- the previous code runs unchanged on this schema; reserve is unchanged,
-- and reserve_charged wraps it.
--
-- Its functions are in functions/, which Migrate applies after the
-- migrations; this file keeps the schema changes.

ALTER TABLE __SCHEMA__.buckets ADD COLUMN charged bigint NOT NULL DEFAULT 0;
