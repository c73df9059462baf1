-- reserve_tokens is bucket.Reserve on the stored state: {tokens, last,
-- reserved} after debiting cost millitokens at now for a reservation valid
-- at valid, or NULL when the balance would fall below bucket.MinBalance
-- (or the bucket does not refill).
CREATE OR REPLACE FUNCTION __SCHEMA__.reserve_tokens(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint,
    reserved bigint, now bigint, cost bigint, valid bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    r bigint[];
    debit bigint := cost;
    start bigint;
BEGIN
    IF amt <= 0 THEN
        RETURN NULL;
    END IF;
    r := __SCHEMA__.refill(cap, amt, per, tok, last, until_ms, now);
    start := greatest(r[2], until_ms);
    IF valid > start THEN
        debit := debit + greatest(0, r[1] + least(__SCHEMA__.mul_div(valid - start, amt, per), 4000000000000000) - cap);
    END IF;
    IF r[1] - debit < -1000000000000000 THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY[r[1] - debit, r[2], greatest(reserved, valid)];
END $$;
