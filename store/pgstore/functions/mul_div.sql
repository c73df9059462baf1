-- mul_div is floor(a*b/c) for a, b >= 0, c > 0, saturating at max int8.
CREATE OR REPLACE FUNCTION __SCHEMA__.mul_div(a bigint, b bigint, c bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT least(div(a::numeric * b, c), 9223372036854775807)::bigint $$;
