-- prod_less reports a*b < c*d exactly.
CREATE OR REPLACE FUNCTION __SCHEMA__.prod_less(a bigint, b bigint, c bigint, d bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT a::numeric * b < c::numeric * d $$;
