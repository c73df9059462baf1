-- extend moves a live lease's expiry to now+ttl. o_status: 0 done,
-- 1 unknown lease, 2 expired.
CREATE OR REPLACE FUNCTION __SCHEMA__.extend(p_id uuid, p_now bigint, p_ttl bigint,
    OUT o_status int, OUT o_expires bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint;
    v_exp bigint;
BEGIN
    SELECT expires_ms INTO v_exp FROM __SCHEMA__.leases WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        o_status := 1;
        RETURN;
    END IF;
    v_now := coalesce(p_now, __SCHEMA__.now_ms());
    IF v_exp <= v_now THEN
        o_status := 2;
        RETURN;
    END IF;
    o_expires := v_now + p_ttl;
    UPDATE __SCHEMA__.leases SET expires_ms = o_expires WHERE id = p_id;
    o_status := 0;
END $$;
