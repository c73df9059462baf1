-- Usage history (store.Usager): one writer's totals for one (dimension,
-- caller) over one minute or one hour, rows replaced whole by each put.
-- Each table is partitioned by range on start: usage_minute by UTC day,
-- usage_hour by UTC month. The store creates partitions as rows need them
-- (usage_minute_YYYYMMDD, usage_hour_YYYYMM) and expires rows by dropping
-- whole partitions past their retention; it never deletes rows. expires
-- is the row's own end of retention: reads leave out rows past it, which
-- a partition keeps until its newest row is.
CREATE TABLE __SCHEMA__.usage_minute (
    dimension text COLLATE "C" NOT NULL,
    start     timestamptz NOT NULL, -- a whole minute
    caller    text COLLATE "C" NOT NULL,
    writer    text COLLATE "C" NOT NULL,
    counters  jsonb NOT NULL,       -- {"name": total, ...}
    updated   timestamptz,          -- when the writer last put it; NULL for none
    expires   timestamptz NOT NULL, -- start + 1 minute + the writer's retention
    PRIMARY KEY (dimension, start, caller, writer)
) PARTITION BY RANGE (start);

CREATE TABLE __SCHEMA__.usage_hour (
    dimension text COLLATE "C" NOT NULL,
    start     timestamptz NOT NULL, -- a whole hour
    caller    text COLLATE "C" NOT NULL,
    writer    text COLLATE "C" NOT NULL,
    counters  jsonb NOT NULL,
    updated   timestamptz,
    expires   timestamptz NOT NULL, -- start + 1 hour + the writer's retention
    PRIMARY KEY (dimension, start, caller, writer)
) PARTITION BY RANGE (start);
