-- extend.lua: move a lease's expiry to now+ttl.
-- KEYS: lease hash, vendor lease index. ARGV: prefix, id, now, ttl ms.
-- Returns {0} no record, {-1} expired, {1, expires}.
local PREFIX = keyspace(ARGV[1])
local items, _, _, exp = readLease(KEYS[1])
if not items then
  return { 0 }
end
local now = clock(ARGV[3])
if exp <= now then
  return { -1 }
end
exp = now + tonumber(ARGV[4])
local e = fmt(exp)
redis.call('HSET', KEYS[1], 'exp', e)
redis.call('ZADD', KEYS[2], 'XX', e, ARGV[2])
for _, it in ipairs(items) do
  redis.call('ZADD', dimIndexKey(PREFIX, it[1]), 'XX', e, ARGV[2])
end
return { 1, exp }
