-- put.lua: create or reconfigure a bucket (bucket.Reconfigure at the
-- aligned time; a reconfiguration keeps a cooldown, a reset ends it; the
-- latest reservation's instant moves on when pending reservations' debts
-- lose their meaning).
-- KEYS: bucket, vendor bucket set. ARGV: now, name, t, c, a, p, f, k, d,
-- reset, max skew ms, registry ('' none: the caller registered the vendor),
-- vendor.
-- ARGV[14], the condition: '' none, 'a' create only if absent, 'm' only
-- if the bucket exists with the configuration ARGV[15..20] (type,
-- capacity, amount, period, floor in limits units, effective cost per
-- call: store.SameConfig; zeros when unused).
-- ARGV[21]: '1' when a new time-based bucket starts with a balance of zero
-- (store.PutBucketRequest.Empty), else '0'.
-- Returns {-1, old type} when the type would change to or from concurrent,
-- {-2, 1 if the bucket exists else 0} when the condition fails (nothing
-- changes in either case), else {now}.

-- putConflict reports whether the condition ARGV[14] fails for the stored
-- limits L (nil: no bucket).
local function putConflict(L)
  local cond = ARGV[14]
  if cond == 'a' then
    return L ~= nil
  end
  if cond ~= 'm' then
    return false
  end
  if not L then
    return true
  end
  local k = L.k
  if k == nil or k == 0 then
    k = 1
  end
  return L.t ~= tonumber(ARGV[15]) or L.cap ~= tonumber(ARGV[16]) or L.amt ~= tonumber(ARGV[17]) or
    L.per ~= tonumber(ARGV[18]) or L.floor ~= tonumber(ARGV[19]) or k ~= tonumber(ARGV[20])
end

local now = clock(ARGV[1])
local N = { t = tonumber(ARGV[3]), cap = tonumber(ARGV[4]), amt = tonumber(ARGV[5]), per = tonumber(ARGV[6]),
  floor = tonumber(ARGV[7]) }
local L, tok, last, u, res = loadBucket(KEYS[1])
if putConflict(L) then
  if L then
    return { -2, 1 }
  end
  return { -2, 0 }
end
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
  if ARGV[21] == '1' and N.t ~= 3 then
    tok = 0 -- re-created after a loss: it earns from now on
  end
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
