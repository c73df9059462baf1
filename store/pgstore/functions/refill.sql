-- refill is bucket.Refill: {tokens, last} earned up to now. cap and amt are
-- millitokens, per is ms. Version 2's overload, without a cooldown (only
-- version 2's replay calls it); the operations call the one below.
CREATE OR REPLACE FUNCTION __SCHEMA__.refill(cap bigint, amt bigint, per bigint, tok bigint, last bigint, now bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    a bigint;
BEGIN
    IF amt <= 0 OR now <= last THEN
        RETURN ARRAY[tok, last];
    END IF;
    IF tok >= cap OR NOT __SCHEMA__.prod_less(now - last, amt, cap - tok, per) THEN
        RETURN ARRAY[cap, now];
    END IF;
    a := __SCHEMA__.mul_div(now - last, amt, per);
    IF a = 0 THEN
        RETURN ARRAY[tok, last];
    END IF;
    RETURN ARRAY[tok + a, last + __SCHEMA__.ceil_mul_div(a, per, amt)];
END $$;

-- refill is bucket.Refill: {tokens, last} earned up to now. Nothing is
-- earned before until_ms (the cooldown's end, 0 for none), and earning
-- restarts from it. cap and amt are millitokens, per is ms.
CREATE OR REPLACE FUNCTION __SCHEMA__.refill(cap bigint, amt bigint, per bigint, tok bigint, last bigint, until_ms bigint, now bigint)
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    a bigint;
BEGIN
    IF amt <= 0 OR now <= last OR now <= until_ms THEN
        RETURN ARRAY[tok, last];
    END IF;
    last := greatest(last, until_ms);
    IF tok >= cap OR NOT __SCHEMA__.prod_less(now - last, amt, cap - tok, per) THEN
        RETURN ARRAY[cap, now];
    END IF;
    a := __SCHEMA__.mul_div(now - last, amt, per);
    IF a = 0 THEN
        RETURN ARRAY[tok, last];
    END IF;
    RETURN ARRAY[tok + a, last + __SCHEMA__.ceil_mul_div(a, per, amt)];
END $$;
