-- Version 9: waiting in line no longer starves concurrent dimensions.
--
-- A waiter ticket holds its request's cost on its dimension (waiters.cost;
-- tickets written before this version count as 1), and acquire grants a
-- concurrent item when the bucket's balance covers the request's cost plus
-- the costs of the live tickets of others ahead of it, not only at the head
-- of the queue: a waiter behind others takes the free slots they do not
-- need, a large request is overtaken by no more than the slots it cannot
-- use yet, and a dead ticket holds back only its own cost until it expires
-- (see store.AcquireRequest.Queue). Only acquire changes; its signature and
-- results are those of version 4, and it keeps version 5's refusal of a
-- caller more than the maximum skew behind.
--
-- Its functions are in functions/, which Migrate applies after the
-- migrations; this file keeps the schema changes.
--
-- __SCHEMA__ is replaced by the quoted schema name when the migration runs.

ALTER TABLE __SCHEMA__.waiters ADD COLUMN cost bigint NOT NULL DEFAULT 1; -- tokens
