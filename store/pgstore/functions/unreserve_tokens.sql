-- unreserve_tokens is bucket.Unreserve on the stored state: {tokens, last,
-- given back} after cancelling at now a reservation of cost millitokens
-- valid at valid.
CREATE OR REPLACE FUNCTION __SCHEMA__.unreserve_tokens(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint,
    reserved bigint, now bigint, cost bigint, valid bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    r bigint[];
    back bigint := cost;
BEGIN
    IF amt <= 0 OR now >= valid OR cost <= 0 OR reserved < valid THEN
        RETURN ARRAY[tok, last, 0];
    END IF;
    IF reserved > valid THEN
        back := cost - __SCHEMA__.ceil_mul_div(reserved - valid, amt, per);
    END IF;
    IF back <= 0 THEN
        RETURN ARRAY[tok, last, 0];
    END IF;
    r := __SCHEMA__.refill(cap, amt, per, tok, last, until_ms, now);
    IF r[1] + back > cap THEN
        back := greatest(cap - r[1], 0);
    END IF;
    RETURN ARRAY[r[1] + back, r[2], back];
END $$;
