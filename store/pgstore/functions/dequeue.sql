-- dequeue deletes p_id's tickets (and the dead ones) from the waiter
-- queues of the named dimensions, their bucket rows locked in name order.
CREATE OR REPLACE FUNCTION __SCHEMA__.dequeue(p_dims text[], p_id uuid, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint;
BEGIN
    PERFORM 1 FROM __SCHEMA__.buckets WHERE name = ANY (p_dims) AND limit_type = 3 ORDER BY name FOR UPDATE;
    v_now := coalesce(p_now, __SCHEMA__.now_ms());
    DELETE FROM __SCHEMA__.waiters WHERE dim = ANY (p_dims) AND (id = p_id OR expires_ms <= v_now);
END $$;
