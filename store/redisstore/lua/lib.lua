-- lib.lua: the bucket package's integer math ported to Redis Lua 5.1, where
-- every number is an IEEE double. Stored values are integers below 2^53 and
-- so exact; products that can exceed 2^53 (elapsed*amount, need*period,
-- tokens*factor) are computed exactly with 24-bit limbs. Every script is this
-- file followed by its own body, so the functions are local to each script.
local B24 = 16777216
local SAT = 9007199254740992 -- 2^53: saturated quotient ("huge")
local MAX_RETRY_MS = 100 * 366 * 24 * 3600 * 1000

-- fmt formats an integer exactly for a command argument. Redis converts a
-- number argument with %.14g, which is exact only below 10^14; larger values
-- (balances of big buckets) go through string.format.
local function fmt(x)
  if x < 1e14 and x > -1e14 then
    return x
  end
  return string.format('%d', x)
end

local function limbs(a)
  local a0 = a % B24
  local t = (a - a0) / B24
  local a1 = t % B24
  return a0, a1, (t - a1) / B24
end

-- mul returns a*b (a, b non-negative integers <= 2^53) as six normalized
-- base-2^24 limbs, least significant first.
local function mul(a, b)
  local a0, a1, a2 = limbs(a)
  local b0, b1, b2 = limbs(b)
  local p = { a0 * b0, a0 * b1 + a1 * b0, a0 * b2 + a1 * b1 + a2 * b0, a1 * b2 + a2 * b1, a2 * b2, 0 }
  local c = 0
  for i = 1, 6 do
    local v = p[i] + c
    local lo = v % B24
    p[i] = lo
    c = (v - lo) / B24
  end
  return p
end

-- prodLess reports whether a*b < c*d exactly.
local function prodLess(a, b, c, d)
  local x, y = a * b, c * d
  if x < SAT and y < SAT then -- both exact in a double
    return x < y
  end
  local p, q = mul(a, b), mul(c, d)
  for i = 6, 1, -1 do
    if p[i] ~= q[i] then
      return p[i] < q[i]
    end
  end
  return false
end

-- mulDivRem returns q = floor(a*b/c) and r = a*b - q*c, exactly, for
-- a, b >= 0 and 0 < c < 2^50. A quotient of 2^52 or more saturates to SAT
-- (the Go code saturates at 2^63-1; no caller needs an exact value that
-- large: every such result is compared with a bound far below 2^52).
local function mulDivRem(a, b, c)
  if a == 0 or b == 0 then
    return 0, 0
  end
  local ab = a * b
  if ab < SAT then
    -- ab is exact, and so is floor(ab/c): a correctly rounded quotient of
    -- integers below 2^53 never rounds up to the next integer.
    local q = math.floor(ab / c)
    return q, ab - q * c
  end
  local approx = ab / c
  if approx >= 4503599627370496 then
    return SAT, 0
  end
  local q = math.floor(approx)
  local p, s = mul(a, b), mul(q, c)
  local carry = 0
  local d = {}
  for i = 1, 6 do
    local v = p[i] - s[i] + carry
    local lo = v % B24
    d[i] = lo
    carry = (v - lo) / B24
  end
  local r = carry
  for i = 6, 1, -1 do
    r = r * B24 + d[i]
  end
  while r < 0 do
    q = q - 1
    r = r + c
  end
  while r >= c do
    q = q + 1
    r = r - c
  end
  return q, r
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

-- refill is bucket.Refill.
local function refill(L, tok, last, now)
  if L.amt <= 0 or now <= last then
    return tok, last
  end
  if tok >= L.cap then
    return L.cap, now
  end
  local need = L.cap - tok
  local elapsed = now - last
  if not prodLess(elapsed, L.amt, need, L.per) then
    return L.cap, now
  end
  local add = mulDiv(elapsed, L.amt, L.per)
  if add == 0 then
    return tok, last
  end
  local used = ceilMulDiv(add, L.per, L.amt)
  return tok + add, last + used
end

-- retryIn is bucket.RetryIn.
local function retryIn(L, tok, last, now, cost)
  if L.amt <= 0 or tok >= cost or tok >= L.cap then
    return 0
  end
  local e = ceilMulDiv(cost - tok, L.per, L.amt)
  if e > MAX_RETRY_MS then
    return MAX_RETRY_MS
  end
  local d = last - now -- exact; last + e - now could round above 2^53
  if d > MAX_RETRY_MS then
    return MAX_RETRY_MS
  end
  local w = d + e
  if w <= 0 then
    return 0
  elseif w > MAX_RETRY_MS then
    return MAX_RETRY_MS
  end
  return w
end

-- take is bucket.Take: returns tokens, last, wait, ok.
local function take(L, tok, last, now, cost)
  local t, l = refill(L, tok, last, now)
  if t >= cost then
    return t - cost, l, 0, true
  end
  if L.amt <= 0 then
    return tok, last, 0, false
  end
  return tok, last, retryIn(L, tok, last, now, cost), false
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

-- concurrentRetry is bucket.ConcurrentRetry.
local function concurrentRetry(now, earliest, poll)
  local w = poll
  if earliest > now and earliest - now < w then
    w = earliest - now
  end
  if w < 1 then
    w = 1
  end
  return w
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

