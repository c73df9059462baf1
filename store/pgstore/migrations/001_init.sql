-- Sluice PostgreSQL store, version 1: tables, the integer token-bucket math
-- (a line-by-line port of package bucket) and one function per operation.
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

CREATE TABLE __SCHEMA__.buckets (
    name             text COLLATE "C" PRIMARY KEY,
    limit_type       smallint NOT NULL CHECK (limit_type BETWEEN 1 AND 3),
    capacity         bigint   NOT NULL, -- tokens
    refill_amount    bigint   NOT NULL, -- tokens per period; 0 for concurrent
    refill_period_ms bigint   NOT NULL, -- 0 for concurrent
    cost_per_call    bigint   NOT NULL, -- 0 means 1
    max_debt         bigint   NOT NULL, -- bucket.Config.MaxDebt as given
    tokens           bigint   NOT NULL, -- millitokens at last_refill_ms
    last_refill_ms   bigint   NOT NULL, -- Unix ms
    version          bigint   NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

CREATE TABLE __SCHEMA__.leases (
    id         uuid PRIMARY KEY,
    caller     text   NOT NULL,
    created_ms bigint NOT NULL,
    expires_ms bigint NOT NULL,
    dims       text[] COLLATE "C" NOT NULL, -- request order
    costs      bigint[] NOT NULL            -- tokens, parallel to dims
);
CREATE INDEX leases_expires_idx ON __SCHEMA__.leases (expires_ms);
CREATE INDEX leases_dims_idx ON __SCHEMA__.leases USING gin (dims);

-- now_ms is the server clock in Unix milliseconds, truncated like
-- time.Time.UnixMilli.
CREATE FUNCTION __SCHEMA__.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS
$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- mul_div is floor(a*b/c) for a, b >= 0, c > 0, saturating at max int8.
CREATE FUNCTION __SCHEMA__.mul_div(a bigint, b bigint, c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT least(div(a::numeric * b, c), 9223372036854775807)::bigint $$;

-- ceil_mul_div is ceil(a*b/c) for a, b >= 0, c > 0, saturating.
CREATE FUNCTION __SCHEMA__.ceil_mul_div(a bigint, b bigint, c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT least(div(a::numeric * b + (c - 1), c), 9223372036854775807)::bigint $$;

-- prod_less reports a*b < c*d exactly.
CREATE FUNCTION __SCHEMA__.prod_less(a bigint, b bigint, c bigint, d bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT a::numeric * b < c::numeric * d $$;

-- refill is bucket.Refill: {tokens, last} earned up to now. cap and amt are
-- millitokens, per is ms.
CREATE FUNCTION __SCHEMA__.refill(cap bigint, amt bigint, per bigint, tok bigint, last bigint, now bigint)
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

-- retry_in is bucket.RetryIn on the stored (unrefilled) state.
CREATE FUNCTION __SCHEMA__.retry_in(cap bigint, amt bigint, per bigint, tok bigint, last bigint, now bigint, cost bigint)
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

-- floor_milli is bucket.Limits.Floor: the lowest balance Adjust may reach.
CREATE FUNCTION __SCHEMA__.floor_milli(limit_type smallint, capacity bigint, max_debt bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN limit_type = 3 OR max_debt = -1 THEN 0
            WHEN max_debt = 0 THEN -capacity * 1000
            ELSE -max_debt * 1000 END
$$;
