-- put.lua: create or reconfigure a bucket (bucket.Reconfigure at the
-- aligned time; a reconfiguration keeps a cooldown, a reset ends it; the
-- latest reservation's instant moves on when pending reservations' debts
-- lose their meaning).
-- KEYS: bucket, vendor bucket set. ARGV: now, name, t, c, a, p, f, k, d,
-- reset, max skew ms, registry ('' none: the caller registered the vendor),
-- vendor.
-- Returns {-1, old type} when the type would change to or from concurrent
-- (nothing changes), else {now}.
local now = clock(ARGV[1])
local N = { t = tonumber(ARGV[3]), cap = tonumber(ARGV[4]), amt = tonumber(ARGV[5]), per = tonumber(ARGV[6]),
  floor = tonumber(ARGV[7]) }
local L, tok, last, u, res = loadBucket(KEYS[1])
if L then
  if (L.t == 3) ~= (N.t == 3) then
    return { -1, L.t }
  end
  local at
  tok, last, at = align(L, tok, last, now, tonumber(ARGV[11]))
  -- A reset fills the bucket and ends any cooldown; a reconfiguration keeps
  -- a cooldown and never forgives what pending reservations owe.
  tok, last, u, res = reconfigure(L, N, tok, last, u, res, at, ARGV[10] == '1')
  if u == 0 then
    redis.call('HDEL', KEYS[1], 'u')
  end
  if res ~= 0 then
    redis.call('HSET', KEYS[1], 'r', fmt(res))
  end
else
  tok, last = N.cap, now
  -- A new incarnation: leases of an earlier bucket of this name never
  -- restore into this one (keys.lua removeLease). The counter shares the
  -- vendor's slot (KEYS[2] is prefix{vendor}:buckets).
  redis.call('HSET', KEYS[1], 'g', redis.call('INCR', string.sub(KEYS[2], 1, -9) .. ':gen'))
end
redis.call('HSET', KEYS[1], 't', ARGV[3], 'c', ARGV[4], 'a', ARGV[5], 'p', ARGV[6], 'f', ARGV[7],
  'k', ARGV[8], 'd', ARGV[9], 'v', fmt(tok), 'l', fmt(last))
redis.call('SADD', KEYS[2], ARGV[2])
if ARGV[12] ~= '' then
  redis.call('SADD', ARGV[12], ARGV[13]) -- with the bucket: delete.lua may prune
end
return { now }
