-- Sluice PostgreSQL store, schema version 4: reservations and waiter
-- queues. A bucket keeps the latest valid instant of its reservations
-- (bucket.State.Reserved) in reserved_until_ms; a lease record made by a
-- reservation keeps its valid instant in valid_ms (0 for an acquisition);
-- waiters holds the tickets of the waiter queues of concurrent buckets,
-- served in (at_ms, id) order (uuid order is byte order). Three new
-- operation functions, reserve, cancel and dequeue; acquire gains a queue
-- argument and reports the tickets ahead; adjust and put_bucket clamp to
-- the effective floor (bucket.EffectiveFloor) and put_bucket moves the
-- latest valid instant on when it forgives pending reservations.
--
-- Tickets are read and written only while the row of their bucket is
-- locked (FOR UPDATE, in name order), so the queue of a bucket changes
-- atomically with its balance; deleting a bucket deletes its tickets
-- (ON DELETE CASCADE).
--
-- Upgrading in place: the columns are added with constant defaults, which
-- PostgreSQL does without rewriting the tables, so every bucket keeps its
-- balance and reads as never reserved, every lease reads as granted by an
-- acquisition. The functions of version 3 keep their signatures: acquire
-- becomes a wrapper of the new one (no queue of its own, but it does not
-- overtake waiters), adjust and put_bucket are replaced, so processes still
-- running the previous code keep working during a rolling upgrade.
--
-- Its functions are in functions/, which Migrate applies after the
-- migrations; this file keeps the schema changes.
--
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

ALTER TABLE __SCHEMA__.buckets ADD COLUMN reserved_until_ms bigint NOT NULL DEFAULT 0; -- Unix ms, 0 = never
ALTER TABLE __SCHEMA__.leases ADD COLUMN valid_ms bigint NOT NULL DEFAULT 0;           -- Unix ms, 0 = acquisition

CREATE TABLE __SCHEMA__.waiters (
    dim        text COLLATE "C" NOT NULL REFERENCES __SCHEMA__.buckets (name) ON DELETE CASCADE,
    id         uuid   NOT NULL, -- the waiter's lease id
    at_ms      bigint NOT NULL, -- its place: the decision time it first took a ticket
    expires_ms bigint NOT NULL,
    PRIMARY KEY (dim, id)
);
CREATE INDEX waiters_order_idx ON __SCHEMA__.waiters (dim, at_ms, id);
