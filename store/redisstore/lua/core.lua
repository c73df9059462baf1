-- core.lua: the bucket package's integer math ported to Redis Lua 5.1, where
-- every number is an IEEE double. Stored values are integers below 2^53 and
-- so exact; products that can exceed 2^53 (elapsed*amount, need*period,
-- tokens*factor) are computed exactly with 24-bit limbs.
--
-- Every script starts with this file, so its functions are local to each
-- script and re-created on every call (Redis 7 keeps no state between
-- EVALSHA calls): it holds only what acquire.lua, the hot path, needs, as
-- few closures as possible and no table allocations on the fast paths.
-- lib.lua builds the other scripts' helpers on top of it.
local B24 = 16777216
local SAT = 9007199254740992 -- 2^53: saturated quotient ("huge")
local MAX_RETRY_MS = 100 * 366 * 24 * 3600 * 1000

-- mul returns a*b (a, b non-negative integers <= 2^53) as six normalized
-- base-2^24 limbs, least significant first.
local function mul(a, b)
  local a0 = a % B24
  local t = (a - a0) / B24
  local a1 = t % B24
  local a2 = (t - a1) / B24
  local b0 = b % B24
  t = (b - b0) / B24
  local b1 = t % B24
  local b2 = (t - b1) / B24
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
    local x = ab / c
    local q = x - x % 1
    return q, ab - q * c
  end
  local approx = ab / c
  if approx >= 4503599627370496 then
    return SAT, 0
  end
  local q = approx - approx % 1
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

-- refillRaw is bucket.Refill on a bucket of capacity cap refilling amt every
-- per (millitokens, ms) whose cooldown ends at u (0: none): returns tokens,
-- last. Nothing is earned before u; earning starts from u.
local function refillRaw(cap, amt, per, tok, last, u, now)
  if amt <= 0 or now <= last or now <= u then
    return tok, last
  end
  if last < u then
    last = u
  end
  if tok >= cap then
    return cap, now
  end
  local elapsed = now - last
  if not prodLess(elapsed, amt, cap - tok, per) then
    return cap, now
  end
  local add = mulDivRem(elapsed, amt, per)
  if add == 0 then
    return tok, last
  end
  local used, r = mulDivRem(add, per, amt) -- ceil(add*per/amt)
  if used < SAT and r > 0 then
    used = used + 1
  end
  return tok + add, last + used
end

-- retryInRaw is bucket.RetryIn (cost in millitokens) on a bucket whose
-- cooldown ends at u (0: none): the wait runs to u, then for as long as the
-- bucket takes to earn cost from there.
local function retryInRaw(cap, amt, per, tok, last, u, now, cost)
  if amt <= 0 then
    return 0
  end
  if tok >= cost or tok >= cap then
    local w = u - now
    if w <= 0 then
      return 0
    elseif w > MAX_RETRY_MS then
      return MAX_RETRY_MS
    end
    return w
  end
  local start = last
  if u > start then
    start = u
  end
  local e, r = mulDivRem(cost - tok, per, amt) -- ceil((cost-tok)*per/amt)
  if e < SAT and r > 0 then
    e = e + 1
  end
  if e > MAX_RETRY_MS then
    return MAX_RETRY_MS
  end
  local d = start - now -- exact; start + e - now could round above 2^53
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
