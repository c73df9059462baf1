-- Sluice PostgreSQL store, schema version 1: the tables. The functions that
-- operate on them are in version 2.
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

-- A bucket deleted and re-created under the same name is a different
-- bucket: its incarnation, drawn from a sequence when the row is inserted
-- and kept by reconfiguration, tells them apart.
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
    version          bigint   NOT NULL DEFAULT 0,
    incarnation      bigserial NOT NULL
) WITH (fillfactor = 50);

-- A lease record keeps, for each dimension, the incarnation of the bucket
-- it was granted on: release and reconcile restore only into that very
-- bucket, and a lease whose buckets are all gone or re-created is an
-- orphan.
CREATE TABLE __SCHEMA__.leases (
    id         uuid PRIMARY KEY,
    caller     text   NOT NULL,
    created_ms bigint NOT NULL,
    expires_ms bigint NOT NULL,
    dims       text[] COLLATE "C" NOT NULL, -- request order
    costs      bigint[] NOT NULL,           -- tokens, parallel to dims
    incs       bigint[] NOT NULL            -- bucket incarnations, parallel to dims
);
CREATE INDEX leases_expires_idx ON __SCHEMA__.leases (expires_ms);
CREATE INDEX leases_dims_idx ON __SCHEMA__.leases USING gin (dims);
