-- acquire.lua: all-or-nothing debit of 1..16 buckets, plus a lease record
-- when asked or when an item is concurrent.
-- KEYS: per item: bucket, dim lease index.
-- ARGV: now (-1: server TIME), ttl ms, record (0/1), poll ms, id, caller,
--       the first item's key tag (prefix{vendor}, naming the lease hash
--       tag:lease:<id> and the vendor lease index tag:leases, in the same
--       slot), then per item: dimension, cost (0: cost per call).
-- Returns {-1, i} unknown dimension i; {-2, i, cost, capacity} cost above
-- capacity; {-3} lease id in use; {0, now, retry, 0, items...} denied;
-- {1, now, expires, recorded, items...} granted; items are 5 numbers each:
-- type, cost, capacity millitokens, remaining, retry.
local now = clock(ARGV[1])
local n = #KEYS / 2
local Ls, toks, lasts, costs = {}, {}, {}, {}
for i = 1, n do
  local L, tok, last = loadBucket(KEYS[2 * i - 1])
  if not L then
    return { -1, i }
  end
  Ls[i], toks[i], lasts[i] = L, tok, last
end
local record = ARGV[3] == '1'
for i = 1, n do
  local L = Ls[i]
  local cost = tonumber(ARGV[7 + 2 * i])
  if cost == 0 then
    cost = L.k
    if cost == 0 then
      cost = 1
    end
  end
  if cost * 1000 > L.cap then
    return { -2, i, cost, L.cap }
  end
  costs[i] = cost
  if L.t == 3 then
    record = true
  end
end
local out = { 1, now, 0, 0 }
local granted, retry = true, 0
local nt, nl = {}, {}
for i = 1, n do
  local L = Ls[i]
  local t, l, wait, ok = take(L, toks[i], lasts[i], now, costs[i] * 1000)
  nt[i], nl[i] = t, l
  local rem = t
  if not ok then
    granted = false
    if L.t == 3 then
      local e = redis.call('ZRANGE', KEYS[2 * i], 0, 0, 'WITHSCORES')
      local earliest = 0
      if e[2] then
        earliest = tonumber(e[2])
      end
      wait = concurrentRetry(now, earliest, tonumber(ARGV[4]))
    end
    rem = refill(L, toks[i], lasts[i], now)
    if wait > retry then
      retry = wait
    end
  end
  local b = 4 + 5 * (i - 1)
  out[b + 1], out[b + 2], out[b + 3], out[b + 4], out[b + 5] = L.t, costs[i], L.cap, rem, wait
end
if not granted then
  out[1], out[3] = 0, retry
  for i = 1, n do
    local b = 4 + 5 * (i - 1)
    if out[b + 5] == 0 then
      out[b + 4] = refill(Ls[i], toks[i], lasts[i], now)
    end
  end
  return out
end
local exp = now + tonumber(ARGV[2])
if record then
  local id = ARGV[5]
  local lkey = ARGV[7] .. ':lease:' .. id
  if redis.call('EXISTS', lkey) == 1 then
    return { -3 }
  end
  local h = { 'n', fmt(n), 'by', ARGV[6], 't0', fmt(now), 'exp', fmt(exp) }
  for i = 1, n do
    h[#h + 1] = 'd' .. i
    h[#h + 1] = ARGV[6 + 2 * i]
    h[#h + 1] = 'c' .. i
    h[#h + 1] = fmt(costs[i])
    redis.call('ZADD', KEYS[2 * i], fmt(exp), id)
  end
  redis.call('HSET', lkey, unpack(h))
  redis.call('ZADD', ARGV[7] .. ':leases', fmt(exp), id)
  out[4] = 1
end
for i = 1, n do
  saveState(KEYS[2 * i - 1], nt[i], nl[i])
end
out[3] = exp
return out
