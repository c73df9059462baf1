-- put.lua: create or reconfigure a bucket (bucket.Reconfigure at the
-- aligned time; a reconfiguration keeps a cooldown, a reset ends it).
-- KEYS: bucket, vendor bucket set. ARGV: now, name, t, c, a, p, f, k, d,
-- reset, max skew ms, registry ('' none: the caller registered the vendor),
-- vendor.
-- Returns {-1, old type} when the type would change to or from concurrent
-- (nothing changes), else {now}.
local now = clock(ARGV[1])
local N = { t = tonumber(ARGV[3]), cap = tonumber(ARGV[4]), amt = tonumber(ARGV[5]), per = tonumber(ARGV[6]),
  floor = tonumber(ARGV[7]) }
local L, tok, last, u = loadBucket(KEYS[1])
if L then
  if (L.t == 3) ~= (N.t == 3) then
    return { -1, L.t }
  end
  local at
  tok, last, at = align(L, tok, last, now, tonumber(ARGV[11]))
  tok, last = refill(L, tok, last, u, at)
  if ARGV[10] == '1' then
    -- A reset fills the bucket and ends any cooldown.
    tok, last = N.cap, at
    redis.call('HDEL', KEYS[1], 'u')
  elseif L.t == 3 then
    -- A concurrent balance is capacity minus what is held: the capacity
    -- change moves it, possibly below zero until holders release.
    tok = tok + N.cap - L.cap
  elseif tok < N.floor then
    tok = N.floor
  end
  if tok > N.cap then
    tok = N.cap
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
