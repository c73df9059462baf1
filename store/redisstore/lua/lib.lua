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
-- A state is tokens, last refill, u, the end of the bucket's cooldown
-- (0: none), and res, the latest reservation's valid instant (0: none);
-- only cooldown and reconfigure change u, and only reserve and reconfigure
-- res, so the functions below that do not return them keep them.

-- align is bucket.Align's decision time: a caller at now on a bucket whose
-- refill timestamp is last decides at now, or at last when behind it (the
-- refill timestamp never moves backwards). Returns tokens, last, decision
-- time; skew is unused here (see behind).
local function align(L, tok, last, now, skew)
  if L.amt <= 0 or now >= last then
    return tok, last, now
  end
  return tok, last, last
end

-- behind is bucket.Align's wait: how many ms the clock of a caller at now
-- must still advance before an admission on a bucket whose refill
-- timestamp is last, tolerating skew ms (0: none).
local function behind(L, last, now, skew)
  if L.amt <= 0 or last - now <= skew then
    return 0
  end
  return last - skew - now
end

-- refill is bucket.Refill.
local function refill(L, tok, last, u, now)
  return refillRaw(L.cap, L.amt, L.per, tok, last, u, now)
end

-- retryIn is bucket.RetryIn.
local function retryIn(L, tok, last, u, now, cost)
  return retryInRaw(L.cap, L.amt, L.per, tok, last, u, now, cost)
end

-- skewRetry is bucket.SkewRetry: the wait of an admission refused after
-- behind returned wait > 0, decided at at.
local function skewRetry(L, tok, last, u, at, wait, cost)
  local w = retryIn(L, tok, last, u, at, cost)
  if wait > w then
    w = wait
  end
  if w > MAX_RETRY_MS then
    w = MAX_RETRY_MS
  end
  return w
end

-- MIN_BALANCE is bucket.MinBalance; MAX_TIME_MS is bucket.MaxTimeMs.
local MIN_BALANCE = -1000000000000000
local MAX_TIME_MS = 9007199254740991

-- reservedDebt is bucket.ReservedDebt for a bucket whose latest reservation
-- is valid at res (0: none).
local function reservedDebt(L, res, now)
  if L.amt <= 0 or res <= now then
    return 0
  end
  local d = ceilMulDiv(res - now, L.amt, L.per)
  if d > -MIN_BALANCE then
    d = -MIN_BALANCE
  end
  return d
end

-- effectiveFloor is bucket.EffectiveFloor.
local function effectiveFloor(L, res, now)
  local f = L.floor - reservedDebt(L, res, now)
  if f < MIN_BALANCE then
    f = MIN_BALANCE
  end
  return f
end

-- adjust is bucket.Adjust: returns tokens, last, applied. During a cooldown
-- a refund lifts the balance at most to zero; the floor is the effective
-- floor, never raises a balance already below it, and a balance already in
-- debt may go the configured floor's depth below where it is (debt is
-- never forgiven), never below MIN_BALANCE.
local function adjust(L, tok, last, u, res, now, delta)
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
  local floor = effectiveFloor(L, res, now)
  if before < floor then
    floor = before
  end
  local deeper = L.floor
  if before < 0 then
    deeper = before + L.floor
  end
  if deeper < MIN_BALANCE then
    deeper = MIN_BALANCE
  end
  if deeper < floor then
    floor = deeper
  end
  t = before - delta
  if t < floor then
    t = floor
  end
  if t > ceiling then
    t = ceiling
  end
  return t, l, before - t
end

-- reserve is bucket.Reserve of cost millitokens valid at validAt: returns
-- tokens, last, reserved and true, or the state unchanged and false.
local function reserve(L, tok, last, u, res, now, cost, validAt)
  if L.amt <= 0 then
    return tok, last, res, false
  end
  local t, l = refill(L, tok, last, u, now)
  local debit = cost
  local start = l
  if u > start then
    start = u
  end
  if validAt > start then
    local earn = mulDiv(validAt - start, L.amt, L.per)
    if earn > 4000000000000000 then
      earn = 4000000000000000
    end
    local over = t + earn - L.cap
    if over > 0 then
      debit = debit + over
    end
  end
  if t - debit < MIN_BALANCE then
    return tok, last, res, false
  end
  if validAt > res then
    res = validAt
  end
  return t - debit, l, res, true
end

-- reserveBound is bucket.ReserveBound.
local function reserveBound(L, tok, last, u, now, cost)
  local w = retryIn(L, tok, last, u, now, cost + MIN_BALANCE)
  if w < 1 then
    w = 1
  end
  return w
end

-- unreserve is bucket.Unreserve of cost millitokens valid at validAt:
-- returns tokens, last and the millitokens given back.
local function unreserve(L, tok, last, u, res, now, cost, validAt)
  if L.amt <= 0 or now >= validAt or cost <= 0 or res < validAt then
    return tok, last, 0
  end
  local relied = 0
  if res > validAt then
    relied = ceilMulDiv(res - validAt, L.amt, L.per)
  end
  local back = cost - relied
  if back <= 0 then
    return tok, last, 0
  end
  local t, l = refill(L, tok, last, u, now)
  if t + back > L.cap then
    back = L.cap - t
    if back < 0 then
      back = 0
    end
  end
  return t + back, l, back
end

-- forgetReserved is bucket's forgetReserved under the new limits N.
local function forgetReserved(N, res, now)
  if res <= now or N.amt <= 0 then
    return res
  end
  local x = res + ceilMulDiv(N.cap, N.per, N.amt)
  if x > MAX_TIME_MS then
    x = MAX_TIME_MS
  end
  return x
end

-- reconfigure is bucket.Reconfigure from limits O to N: returns tokens,
-- last, u and reserved.
local function reconfigure(O, N, tok, last, u, res, now, reset)
  local t, l = refill(O, tok, last, u, now)
  if reset then
    return N.cap, now, 0, forgetReserved(N, res, now)
  end
  if O.t == 3 and N.t == 3 then
    t = t + N.cap - O.cap
  else
    -- A debt is never forgiven: only the capacity clamps.
    if O.cap ~= N.cap or O.amt ~= N.amt or O.per ~= N.per then
      res = forgetReserved(N, res, now)
    end
  end
  if t > N.cap then
    t = N.cap
  end
  return t, l, u, res
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
-- u cooldown end (ms; absent: none), r latest reservation's valid instant
-- (ms; absent: none), g incarnation.

-- loadBucket returns the limits table and state (tokens, last, u, reserved)
-- of key, or nil.
local function loadBucket(key)
  local h = redis.call('HMGET', key, 't', 'c', 'a', 'p', 'f', 'k', 'd', 'v', 'l', 'u', 'r')
  if not h[1] then
    return nil
  end
  local L = { t = tonumber(h[1]), cap = tonumber(h[2]), amt = tonumber(h[3]), per = tonumber(h[4]),
    floor = tonumber(h[5]), k = tonumber(h[6]), d = tonumber(h[7]) }
  return L, tonumber(h[8]), tonumber(h[9]), tonumber(h[10]) or 0, tonumber(h[11]) or 0
end

-- saveState writes tokens and last; u, which only cooldown changes, is
-- written by it alone.
local function saveState(key, tok, last)
  redis.call('HSET', key, 'v', fmt(tok), 'l', fmt(last))
end

-- The settlement counter (bucket.State.Charged), hash field x (absent: 0):
-- the wrapping net change that settlements after the fact (adjust, sync,
-- penalize, cooldown) made to the balance. Reservations read it with their
-- debit, and their callers again at the valid instant (bucket.ChargedSince).
local CHARGED_SPAN = 4503599627370496 -- 2^52 (bucket.ChargedSpan)
local MAX_FORGONE = 1125899906842624 -- 2^50 (bucket.MaxForgone)

-- wrapCharged is bucket.WrapCharged.
local function wrapCharged(c)
  local half = CHARGED_SPAN / 2
  return (c + half) % CHARGED_SPAN - half
end

-- loadCharged returns key's settlement counter.
local function loadCharged(key)
  return tonumber(redis.call('HGET', key, 'x')) or 0
end

-- addCharged adds d millitokens to key's settlement counter.
local function addCharged(key, d)
  if d ~= 0 then
    redis.call('HSET', key, 'x', fmt(wrapCharged(loadCharged(key) + d)))
  end
end

-- cooldownForgone is bucket's cooldownForgone: the refill a cooldown until
-- untl, started at now on a bucket whose cooldown ends at u, forgoes.
local function cooldownForgone(L, u, now, untl)
  local from = now
  if u > from then
    from = u
  end
  if L.amt <= 0 or untl <= from then
    return 0
  end
  local f = ceilMulDiv(untl - from, L.amt, L.per)
  if f > MAX_FORGONE then
    f = MAX_FORGONE
  end
  return f
end
