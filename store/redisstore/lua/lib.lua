-- lib.lua: helpers of every script but acquire.lua, on top of core.lua
-- (every such script is core.lua, lib.lua, then its own body): the rest of
-- the bucket package's math on a limits table, the clock and the bucket
-- hash.

-- fmt formats an integer exactly for a command argument. Redis converts a
-- number argument with %.14g, which is exact only below 10^14; larger values
-- (balances of big buckets) go through string.format.
local function fmt(x)
  if x < 1e14 and x > -1e14 then
    return x
  end
  return string.format('%d', x)
end

local function mulDiv(a, b, c)
  local q = mulDivRem(a, b, c)
  return q
end

local function ceilMulDiv(a, b, c)
  local q, r = mulDivRem(a, b, c)
  if q < SAT and r > 0 then
    q = q + 1
  end
  return q
end

-- A limits table L has: t (type 1..3), cap, amt, per, floor (millitokens, ms).

-- align is bucket.Align: the state and the decision time for a caller at
-- now on a bucket last written at last, tolerating skew ms of clock
-- disagreement. Returns tokens, last, decision time.
local function align(L, tok, last, now, skew)
  if L.amt <= 0 or now >= last then
    return tok, last, now
  end
  if last - now <= skew then
    return tok, last, last
  end
  return tok, now, now
end

-- refill is bucket.Refill.
local function refill(L, tok, last, now)
  return refillRaw(L.cap, L.amt, L.per, tok, last, now)
end

-- retryIn is bucket.RetryIn.
local function retryIn(L, tok, last, now, cost)
  return retryInRaw(L.cap, L.amt, L.per, tok, last, now, cost)
end

-- adjust is bucket.Adjust: returns tokens, last, applied.
local function adjust(L, tok, last, now, delta)
  local t, l = refill(L, tok, last, now)
  local before = t
  t = before - delta
  if t < L.floor then
    t = L.floor
  end
  if t > L.cap then
    t = L.cap
  end
  return t, l, before - t
end

-- penalize is bucket.Penalize: returns tokens, last.
local function penalize(L, tok, last, now, f)
  local t, l = refill(L, tok, last, now)
  if t > 0 then
    t = mulDiv(t, f, 1000)
  end
  return t, l
end

-- restore is bucket.Restore: returns tokens, capped.
local function restore(L, tok, amount)
  local t = tok + amount
  if t > L.cap then
    return L.cap, true
  end
  return t, false
end

-- clock returns ARGV-supplied now, or the server's TIME in ms when it is -1.
local function clock(arg)
  local now = tonumber(arg)
  if now < 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- Bucket hash fields: t type, c capacity, a amount, p period, f floor
-- (millitokens/ms), k cost per call, d max debt (raw config), v tokens, l last.

-- loadBucket returns the limits table and state of key, or nil.
local function loadBucket(key)
  local h = redis.call('HMGET', key, 't', 'c', 'a', 'p', 'f', 'k', 'd', 'v', 'l')
  if not h[1] then
    return nil
  end
  local L = { t = tonumber(h[1]), cap = tonumber(h[2]), amt = tonumber(h[3]), per = tonumber(h[4]),
    floor = tonumber(h[5]), k = tonumber(h[6]), d = tonumber(h[7]) }
  return L, tonumber(h[8]), tonumber(h[9])
end

local function saveState(key, tok, last)
  redis.call('HSET', key, 'v', fmt(tok), 'l', fmt(last))
end
