-- delete.lua: remove a bucket, its lease index and its waiter queue (with
-- its tickets' costs); its
-- lease records become orphans for reconcile.
-- KEYS: bucket, dim lease index, vendor bucket set, waiter queue by place,
-- waiter queue by expiry. ARGV: name, registry
-- ('' none), vendor, vendor lease index.
-- With a registry (a standalone server, one tag per vendor), a vendor left
-- with no bucket and no lease record leaves the registry, in the same
-- script, so ListBuckets, Leases and Reconcile never walk dead vendors.
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[4], KEYS[5])
-- The tickets' costs, prefix{vendor}:qc#rest, in the queue's slot.
local j = string.find(KEYS[4], '}', 1, true)
redis.call('DEL', string.sub(KEYS[4], 1, j) .. ':qc' .. string.sub(KEYS[4], j + 3))
redis.call('SREM', KEYS[3], ARGV[1])
if ARGV[2] ~= '' and redis.call('SCARD', KEYS[3]) == 0 and redis.call('ZCARD', ARGV[4]) == 0 then
  redis.call('SREM', ARGV[2], ARGV[3])
end
return 1
