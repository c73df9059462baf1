-- reserve.lua: an all-or-nothing reservation of 1..16 requests/tokens
-- buckets (bucket.Reserve at the latest valid instant over the items),
-- plus a lease record, valid from that instant, when asked.
-- KEYS: per item: bucket, dim lease index.
-- ARGV: now (-1: server TIME), ttl ms (counted from the valid instant),
--       record (0/1), max wait ms, id, caller, the first item's key tag
--       (prefix{vendor}), the hash of live lease ids ('' none: see
--       keys.lua), max skew ms, then per item: dimension, cost (0: cost
--       per call).
-- Returns {-1, i} unknown dimension i; {-2, i, cost, capacity} cost above
-- capacity; {-3} the id names a lease record of other items or costs;
-- {-4, i} item i is concurrent; else {status, wait, valid, expires,
-- items...}: status 0 denied (valid and expires 0), 1 reserved, 2 reserved
-- with a lease record, 3 the answer to a retry of a recorded reservation
-- (nothing changes); items are 5 numbers each: type, cost, capacity
-- millitokens, remaining, the item's own wait. A denial ends with one
-- more number: how many ms now is behind the refill timestamp of the
-- furthest bucket more than the maximum skew ahead of it (0: none); a
-- grant with one more number per item: its bucket's settlement counter
-- (hash field x, see lib.lua) after the debit.
local now = clock(ARGV[1])
local n = #KEYS / 2
local skew = tonumber(ARGV[9])
local B = {}
for i = 1, n do
  local L, tok, last, u, res = loadBucket(KEYS[2 * i - 1])
  if not L then
    return { -1, i }
  end
  local cost = tonumber(ARGV[9 + 2 * i])
  if cost == 0 then
    cost = L.k
    if cost == 0 then
      cost = 1
    end
  end
  B[i] = { L = L, tok = tok, last = last, u = u, res = res, cost = cost }
end
for i = 1, n do
  if B[i].L.t == 3 then
    return { -4, i }
  end
  if B[i].cost * 1000 > B[i].L.cap then
    return { -2, i, B[i].cost, B[i].L.cap }
  end
end
-- A lease record under this id: a retry of a reservation that already ran
-- is answered as the reservation it was; any other reuse is refused.
local id = ARGV[5]
local lkey = ARGV[7] .. ':lease:' .. id
if redis.call('EXISTS', lkey) == 0 and ARGV[8] ~= '' then
  local tag = redis.call('HGET', ARGV[8], id)
  if tag then
    lkey = tag .. ':lease:' .. id
  end
end
local items, _, t0, exp, va = readLease(lkey)
if items then
  if #items ~= n then
    return { -3 }
  end
  local held = {}
  for _, it in ipairs(items) do
    held[it[1]] = it[2]
  end
  local valid = va
  if t0 > valid then
    valid = t0
  end
  local wait = va - now
  if wait < 0 then
    wait = 0
  end
  local out = { 3, wait, valid, exp }
  for i = 1, n do
    local b = B[i]
    if held[ARGV[8 + 2 * i]] ~= b.cost then
      return { -3 }
    end
    local t, l, at = align(b.L, b.tok, b.last, now, skew)
    t = refill(b.L, t, l, b.u, at)
    local o = #out
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = b.L.t, b.cost, b.L.cap, t, 0
  end
  for i = 1, n do
    out[#out + 1] = loadCharged(KEYS[2 * i - 1])
  end
  return out
end
-- A caller more than the maximum skew behind an item's refill timestamp
-- is refused, changing nothing (bucket.Align, bucket.SkewRetry).
local late, lag = {}, 0
for i = 1, n do
  local b = B[i]
  late[i] = behind(b.L, b.last, now, skew)
  if late[i] > 0 and b.last - now > lag then
    lag = b.last - now
  end
end
if lag > 0 then
  local out = { 0, 0, 0, 0 }
  for i = 1, n do
    local b = B[i]
    local t, l, at = align(b.L, b.tok, b.last, now, skew)
    local w = 0
    if late[i] > 0 then
      w = skewRetry(b.L, t, l, b.u, at, late[i], b.cost * 1000)
    end
    if w > out[2] then
      out[2] = w
    end
    local o = #out
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = b.L.t, b.cost, b.L.cap, refill(b.L, t, l, b.u, at), w
  end
  out[#out + 1] = lag
  return out
end
-- The reservation is valid when every item's balance covers its cost.
local maxWait = tonumber(ARGV[4])
local valid, tooLong = now, false
local out = { 0, 0, 0, 0 }
for i = 1, n do
  local b = B[i]
  b.tok, b.last, b.at = align(b.L, b.tok, b.last, now, skew)
  local w = retryIn(b.L, b.tok, b.last, b.u, b.at, b.cost * 1000)
  if w > maxWait then
    tooLong = true
  end
  if b.at + w > valid then
    valid = b.at + w
  end
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = b.L.t, b.cost, b.L.cap,
    refill(b.L, b.tok, b.last, b.u, b.at), w
end
local wait = valid - now
if not tooLong then
  local bound = 0
  for i = 1, n do
    local b = B[i]
    local ok
    b.nt, b.nl, b.nr, ok = reserve(b.L, b.tok, b.last, b.u, b.res, b.at, b.cost * 1000, valid)
    if not ok then
      local w = reserveBound(b.L, b.tok, b.last, b.u, b.at, b.cost * 1000)
      if w > bound then
        bound = w
      end
    end
  end
  if bound > 0 then
    tooLong, wait = true, bound
  end
end
out[2] = wait
if tooLong then
  out[#out + 1] = 0 -- not behind
  return out
end
exp = valid + tonumber(ARGV[2])
out[1], out[3], out[4] = 1, valid, exp
if ARGV[3] == '1' then
  local e = fmt(exp)
  local h = { 'n', n, 'by', ARGV[6], 't0', fmt(now), 'exp', e, 'va', fmt(valid) }
  for i = 1, n do
    h[#h + 1] = 'd' .. i
    h[#h + 1] = ARGV[8 + 2 * i]
    h[#h + 1] = 'c' .. i
    h[#h + 1] = fmt(B[i].cost)
    -- The bucket's incarnation (put.lua): a cancellation never gives back
    -- to a bucket deleted and re-created under the same name.
    h[#h + 1] = 'g' .. i
    h[#h + 1] = redis.call('HGET', KEYS[2 * i - 1], 'g') or '0'
    redis.call('ZADD', KEYS[2 * i], e, id)
  end
  lkey = ARGV[7] .. ':lease:' .. id
  redis.call('HSET', lkey, unpack(h))
  redis.call('ZADD', ARGV[7] .. ':leases', e, id)
  if ARGV[8] ~= '' then
    redis.call('HSET', ARGV[8], id, ARGV[7])
  end
  out[1] = 2
end
for i = 1, n do
  local b = B[i]
  redis.call('HSET', KEYS[2 * i - 1], 'v', fmt(b.nt), 'l', fmt(b.nl), 'r', fmt(b.nr))
  out[4 + 5 * i - 1] = b.nt
end
for i = 1, n do
  out[#out + 1] = loadCharged(KEYS[2 * i - 1])
end
return out
