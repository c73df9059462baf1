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
-- A state is tokens, last refill and u, the end of the bucket's cooldown
-- (0: none); only cooldown changes u, so the functions below that do not
-- return it keep it.

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
local function refill(L, tok, last, u, now)
  return refillRaw(L.cap, L.amt, L.per, tok, last, u, now)
end

-- retryIn is bucket.RetryIn.
local function retryIn(L, tok, last, u, now, cost)
  return retryInRaw(L.cap, L.amt, L.per, tok, last, u, now, cost)
end

-- adjust is bucket.Adjust: returns tokens, last, applied. During a cooldown
-- a refund lifts the balance at most to zero.
local function adjust(L, tok, last, u, now, delta)
  local t, l = refill(L, tok, last, u, now)
  local before = t
  local ceiling = L.cap
  if now < u then
    local z = before
    if z < 0 then
      z = 0
    end
    if z < ceiling then
      ceiling = z
    end
  end
  t = before - delta
  if t < L.floor then
    t = L.floor
  end
  if t > ceiling then
    t = ceiling
  end
  return t, l, before - t
end

-- penalize is bucket.Penalize: returns tokens, last.
local function penalize(L, tok, last, u, now, f)
  local t, l = refill(L, tok, last, u, now)
  if t > 0 then
    t = mulDiv(t, f, 1000)
  end
  return t, l
end

-- cooldown is bucket.Cooldown until the instant untl: returns tokens, last,
-- u.
local function cooldown(L, tok, last, u, now, untl)
  local t, l = refill(L, tok, last, u, now)
  if untl <= now then
    return t, l, u
  end
  if t > 0 then
    t = 0
  end
  if untl > u then
    u = untl
  end
  return t, l, u
end

-- sync is bucket.Sync down to rem millitokens: returns tokens, last.
local function sync(L, tok, last, u, now, rem)
  local t, l = refill(L, tok, last, u, now)
  if rem < t then
    t = rem
    if t < L.floor then
      t = L.floor
    end
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
-- (millitokens/ms), k cost per call, d max debt (raw config), v tokens, l last,
-- u cooldown end (ms; absent: none).

-- loadBucket returns the limits table and state (tokens, last, u) of key, or
-- nil.
local function loadBucket(key)
  local h = redis.call('HMGET', key, 't', 'c', 'a', 'p', 'f', 'k', 'd', 'v', 'l', 'u')
  if not h[1] then
    return nil
  end
  local L = { t = tonumber(h[1]), cap = tonumber(h[2]), amt = tonumber(h[3]), per = tonumber(h[4]),
    floor = tonumber(h[5]), k = tonumber(h[6]), d = tonumber(h[7]) }
  return L, tonumber(h[8]), tonumber(h[9]), tonumber(h[10]) or 0
end

-- saveState writes tokens and last; u, which only cooldown changes, is
-- written by it alone.
local function saveState(key, tok, last)
  redis.call('HSET', key, 'v', fmt(tok), 'l', fmt(last))
end
