-- reconcile processes up to p_limit expired lease records, skipping rows
-- another transaction holds (FOR UPDATE SKIP LOCKED), so that concurrent
-- reconcilers never wait for each other and never restore a lease twice.
-- Concurrent costs go back with the capacity guard, only into the very
-- bucket each item was granted on (same incarnation); every processed
-- record is deleted; a lease with no such bucket left is an orphan.
CREATE OR REPLACE FUNCTION __SCHEMA__.reconcile(p_now bigint, p_limit int,
    OUT o_restored int, OUT o_reclaimed int, OUT o_capped int, OUT o_orphans int,
    OUT o_dims text[], OUT o_more boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint := coalesce(p_now, __SCHEMA__.now_ms());
    ids uuid[];
BEGIN
    SELECT coalesce(array_agg(s.id ORDER BY s.expires_ms, s.id), '{}') INTO ids
    FROM (SELECT id, expires_ms FROM __SCHEMA__.leases WHERE expires_ms <= v_now
          ORDER BY expires_ms, id LIMIT p_limit FOR UPDATE SKIP LOCKED) s;
    o_restored := 0; o_reclaimed := 0; o_capped := 0; o_orphans := 0; o_dims := '{}'; o_more := false;
    IF cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM __SCHEMA__.buckets
    WHERE name IN (SELECT unnest(dims) FROM __SCHEMA__.leases WHERE id = ANY (ids))
    ORDER BY name FOR UPDATE;
    WITH items AS (
        SELECT k.o AS lo, u.d, u.c, u.inc
        FROM unnest(ids) WITH ORDINALITY AS k(id, o)
        JOIN __SCHEMA__.leases x ON x.id = k.id
        CROSS JOIN LATERAL unnest(x.dims, x.costs, x.incs) AS u(d, c, inc)
    ), j AS (
        SELECT i.lo, i.d, i.c, b.name IS NOT NULL AS live, coalesce(b.limit_type = 3, false) AS conc,
               b.capacity * 1000 AS cap, b.tokens AS tok,
               sum(i.c * 1000) OVER (PARTITION BY i.d, i.inc ORDER BY i.lo ROWS UNBOUNDED PRECEDING) AS run
        FROM items i LEFT JOIN __SCHEMA__.buckets b ON b.name = i.d AND b.incarnation = i.inc
    ), upd AS (
        UPDATE __SCHEMA__.buckets b
        SET tokens = least(b.tokens + s.total, b.capacity * 1000), version = b.version + 1
        FROM (SELECT d, sum(c * 1000)::bigint AS total FROM j WHERE live AND conc GROUP BY d) s
        WHERE b.name = s.d
        RETURNING 1
    ), del AS (
        DELETE FROM __SCHEMA__.leases WHERE id = ANY (ids) RETURNING 1
    ), per_lease AS (
        SELECT lo, bool_or(live) AS live, bool_or(live AND conc) AS reclaimed,
               bool_or(live AND conc AND tok + run > cap) AS capped
        FROM j GROUP BY lo
    )
    SELECT count(*)::int,
           (count(*) FILTER (WHERE live AND reclaimed))::int,
           (count(*) FILTER (WHERE live AND capped))::int,
           (count(*) FILTER (WHERE NOT live))::int,
           coalesce((SELECT array_agg(DISTINCT d ORDER BY d) FROM j WHERE live), '{}')
    INTO o_restored, o_reclaimed, o_capped, o_orphans, o_dims
    FROM per_lease;
    o_more := cardinality(ids) = p_limit AND EXISTS (
        SELECT 1 FROM __SCHEMA__.leases WHERE expires_ms <= v_now AND id <> ALL (ids));
END $$;
