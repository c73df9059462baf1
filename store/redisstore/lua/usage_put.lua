-- usage_put.lua: PutUsage. Writes rows of one dimension and period into
-- their bucket hashes, replacing each row's value whole (HSET) unless the
-- stored value was updated later (a late put never rolls a row back),
-- registers each bucket in the index sorted set, and makes every key
-- expire no earlier than its newest row's retention asks (never earlier
-- than before). Every command replaces a value, so a resent call changes
-- nothing more.
--
-- KEYS[1]: the index (a sorted set of bucket starts, scored by start).
-- KEYS[2..]: the bucket hashes.
-- ARGV[1]: the caller's now in ms.
-- ARGV[2]: index entries scored below this are dropped (buckets past
-- their retention).
-- Then per bucket hash: its start in ms, its expiry in ms, the number n of
-- rows, and n triples: field, the row's Updated in ms, value (JSON whose
-- "u" is that Updated).
local now = tonumber(ARGV[1])
local idx = KEYS[1]
local idxExp = 0
local a = 3
for i = 2, #KEYS do
  local k = KEYS[i]
  local start, exp, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  -- The stored Updated of every row named, then HSET in chunks of the
  -- rows not updated later, within Lua's limit on unpack's results.
  local fields = {}
  for j = 1, n do fields[j] = ARGV[a + 3 * (j - 1)] end
  local stored = {}
  for j = 1, n, 500 do
    local got = redis.call('HMGET', k, unpack(fields, j, math.min(j + 499, n)))
    for x = 1, #got do stored[j + x - 1] = got[x] end
  end
  local args, latest = {}, {}
  for j = 1, n do
    local f, u, v = ARGV[a + 3 * (j - 1)], tonumber(ARGV[a + 3 * (j - 1) + 1]), ARGV[a + 3 * (j - 1) + 2]
    local have = latest[f]
    if have == nil and stored[j] then
      have = tonumber(cjson.decode(stored[j]).u) or 0
    end
    if have == nil or u >= have then
      latest[f] = u
      args[#args + 1] = f
      args[#args + 1] = v
    end
    if #args >= 1000 then
      redis.call('HSET', k, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('HSET', k, unpack(args)) end
  a = a + 3 * n
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
