-- ceil_mul_div is ceil(a*b/c) for a, b >= 0, c > 0, saturating.
CREATE OR REPLACE FUNCTION __SCHEMA__.ceil_mul_div(a bigint, b bigint, c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT least(div(a::numeric * b + (c - 1), c), 9223372036854775807)::bigint $$;
