-- usage_put.lua: PutUsage. Writes rows of one dimension and period into
-- their bucket hashes, replacing each row's value whole (HSET), registers
-- each bucket in the index sorted set, and makes every key expire no
-- earlier than its newest row's retention asks (never earlier than before).
-- Every command replaces a value, so a resent call changes nothing more.
--
-- KEYS[1]: the index (a sorted set of bucket starts, scored by start).
-- KEYS[2..]: the bucket hashes.
-- ARGV[1]: the caller's now in ms.
-- ARGV[2]: index entries scored below this are dropped (buckets past
-- their retention).
-- Then per bucket hash: its start in ms, its expiry in ms, the number n of
-- rows, and n field/value pairs.
local now = tonumber(ARGV[1])
local idx = KEYS[1]
local idxExp = 0
local a = 3
for i = 2, #KEYS do
  local k = KEYS[i]
  local start, exp, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  -- HSET in chunks, within Lua's limit on unpack's results.
  local j = 0
  while j < n do
    local m = math.min(n - j, 500)
    local args = {}
    for x = 1, 2 * m do args[x] = ARGV[a + 2 * j + x - 1] end
    redis.call('HSET', k, unpack(args))
    j = j + m
  end
  a = a + 2 * n
  local ttl = redis.call('PTTL', k)
  if ttl < 0 or ttl < exp - now then
    redis.call('PEXPIREAT', k, exp)
  end
  redis.call('ZADD', idx, start, start)
  if exp > idxExp then idxExp = exp end
end
redis.call('ZREMRANGEBYSCORE', idx, '-inf', '(' .. ARGV[2])
local ttl = redis.call('PTTL', idx)
if ttl < 0 or ttl < idxExp - now then
  redis.call('PEXPIREAT', idx, idxExp)
end
return 0
