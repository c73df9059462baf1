-- dequeue.lua: remove a waiter's tickets from the queues of concurrent
-- dimensions, and prune their dead tickets, at most 500 per dimension.
-- KEYS: per dimension: waiter queue by place, waiter queue by expiry.
-- ARGV: now, id, the channel of notices of freed units ('' for none:
-- store.FreedWatcher), then each dimension's name, in KEYS' order: a
-- notice is published for each.
-- Returns {now}.
local now = clock(ARGV[1])
local n = fmt(now)
for i = 1, #KEYS, 2 do
  -- The tickets' costs, prefix{vendor}:qc#rest, in the queue's slot.
  local j = string.find(KEYS[i], '}', 1, true)
  local ck = string.sub(KEYS[i], 1, j) .. ':qc' .. string.sub(KEYS[i], j + 3)
  redis.call('ZREM', KEYS[i], ARGV[2])
  redis.call('ZREM', KEYS[i + 1], ARGV[2])
  redis.call('HDEL', ck, ARGV[2])
  -- At most 500 dead tickets (the earliest to expire) go per dimension
  -- and call, as in acquire.lua, so that a huge backlog never blocks the
  -- server long: the rest go at later calls.
  local dead = redis.call('ZRANGE', KEYS[i + 1], '-inf', n, 'BYSCORE', 'LIMIT', 0, 500)
  if #dead > 0 then
    redis.call('ZREM', KEYS[i + 1], unpack(dead))
    redis.call('ZREM', KEYS[i], unpack(dead))
    redis.call('HDEL', ck, unpack(dead))
  end
  local dim = ARGV[4 + (i - 1) / 2]
  if ARGV[3] ~= '' and dim then
    redis.call('PUBLISH', ARGV[3], dim)
  end
end
return { now }
