-- acquire.lua: all-or-nothing debit of 1..16 buckets, plus a lease record
-- when asked or when an item is concurrent.
--
-- This is the hot path. Redis re-creates a script's local functions on
-- every call, so it defines as few as it can: core.lua comes wrapped in a
-- function, core(), that defines and returns refillRaw and retryInRaw, and
-- it is called only when a refill needs the arithmetic (the early returns
-- of refillRaw are inlined) or a request is denied. The script also inlines
-- bucket.Take, the clock, the bucket read and bucket.ConcurrentRetry, keeps
-- the buckets' state in one flat table, coerces strings to numbers by
-- arithmetic rather than calls to tonumber, and returns a short reply.
-- Every step matches lib.lua's (take is refill, then retryIn on a denial),
-- and TestLuaMatchesBucket checks core.lua against package bucket.
--
-- KEYS: per item: bucket, dim lease index (prefix{vendor}:dz#rest; the
--       dimension's waiter queue, prefix{vendor}:q#rest by place,
--       prefix{vendor}:qx#rest by expiry and prefix{vendor}:qc#rest, the
--       hash of the tickets' costs, is derived from it: same slot).
-- ARGV: now (-1: server TIME), ttl ms, record (0/1), poll ms, id, caller,
--       the first item's key tag (prefix{vendor}, naming the lease hash
--       tag:lease:<id> and the vendor lease index tag:leases, in the same
--       slot), the hash of live lease ids ('' when the key layout keeps
--       none: see keys.lua), max skew ms, queue ms (0: no ticket), then per
--       item: dimension, cost (0: cost per call).
-- Returns {-1, i} unknown dimension i; {-2, i, cost, capacity} cost above
-- capacity; {-3} the id names a lease record of other items or costs;
-- {0, retry, items..., ahead, lag} denied, items being 5 numbers each:
-- type, cost, capacity millitokens, remaining, retry, ahead the most live
-- waiter tickets ahead of the request's place in its concurrent items'
-- queues, and lag how many ms now is behind the refill timestamp of the
-- furthest bucket more than the maximum skew ahead of it (0: none: such a
-- request is refused before anything else); {1, expires, items...} granted
-- without a lease record, {2, expires, items...} granted with one and {3,
-- expires, items...} the answer to a retry of a recorded acquisition that
-- already ran (nothing changes), items being 4 numbers each: type, cost,
-- capacity millitokens, remaining.
local call = redis.call
local refillRaw, retryInRaw -- from core(), on first use
local now = ARGV[1] + 0
if now < 0 then
  local t = call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
local n = #KEYS / 2
local skew = ARGV[9] + 0
-- S holds 10 numbers per item from 10*(i-1): type, capacity, amount,
-- period (millitokens, ms), cost (tokens), tokens, last refill as stored,
-- after a take the refill time to store, 0 (unused), and the end of its
-- cooldown (0: none). (Constructors size tables for one item: a table grown
-- one field at a time is reallocated at each power of two.)
local S = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
local record, bad = ARGV[3] == '1', 0
for i = 1, n do
  -- Bucket hash fields: t type, c capacity, a amount, p period, v tokens,
  -- l last, u cooldown end (absent: none), k cost per call (f and d only
  -- matter to the other scripts).
  local cost, h = ARGV[10 + 2 * i] + 0, nil
  if cost == 0 then
    h = call('HMGET', KEYS[2 * i - 1], 't', 'c', 'a', 'p', 'v', 'l', 'u', 'k')
    if h[1] then
      cost = h[8] + 0
      if cost == 0 then
        cost = 1
      end
    end
  else
    h = call('HMGET', KEYS[2 * i - 1], 't', 'c', 'a', 'p', 'v', 'l', 'u')
  end
  local typ = h[1]
  if not typ then
    return { -1, i }
  end
  typ = typ + 0
  local cap = h[2] + 0
  if bad == 0 and cost * 1000 > cap then
    bad = i -- reported once every bucket is known to exist
  end
  if typ == 3 then
    record = true
  end
  local u = h[7]
  if u then
    u = u + 0
  else
    u = 0
  end
  local b = 10 * (i - 1)
  S[b + 1], S[b + 2], S[b + 3], S[b + 4], S[b + 5], S[b + 6], S[b + 7], S[b + 8], S[b + 9], S[b + 10] =
    typ, cap, h[3] + 0, h[4] + 0, cost, h[5] + 0, h[6] + 0, 0, 0, u
end
if bad > 0 then
  local b = 10 * (bad - 1)
  return { -2, bad, S[b + 5], S[b + 2] }
end
-- A lease record under this id: a client retry (go-redis retries after a
-- lost reply) of an acquisition that already ran is answered as the grant
-- it was, without debiting again; any other reuse of the id is refused.
local id = ARGV[5]
local lkey = ARGV[7] .. ':lease:' .. id
local rn = call('HGET', lkey, 'n')
if not rn and ARGV[8] ~= '' then
  local tag = call('HGET', ARGV[8], id)
  if tag then
    local k = tag .. ':lease:' .. id
    rn = call('HGET', k, 'n')
    if rn then
      lkey = k
    end
  end
end
if rn then
  -- Answer {3, expires, items...} with the balances available now when the
  -- record holds the request's items at the same resolved costs, in any
  -- order, else {-3}. Nothing changes.
  rn = rn + 0
  if rn ~= n then
    return { -3 }
  end
  local f = call('HGETALL', lkey)
  local m = {}
  for i = 1, #f, 2 do
    m[f[i]] = f[i + 1]
  end
  local held = {}
  for i = 1, n do
    held[m['d' .. i]] = m['c' .. i] + 0
  end
  local out = { 3, m['exp'] + 0 }
  for i = 1, n do
    local b = 10 * (i - 1)
    local typ, cap, amt, per, cost, tok, last, u = S[b + 1], S[b + 2], S[b + 3], S[b + 4], S[b + 5], S[b + 6],
      S[b + 7], S[b + 10]
    if held[ARGV[9 + 2 * i]] ~= cost then
      return { -3 }
    end
    local at = now
    if amt > 0 and now < last then -- bucket.Align: Last never moves back
      at = last
    end
    if amt > 0 and at > last and at > u then
      if not refillRaw then
        refillRaw, retryInRaw = core()
      end
      tok = refillRaw(cap, amt, per, tok, last, u, at)
    end
    local q = 4 * i - 1
    out[q], out[q + 1], out[q + 2], out[q + 3] = typ, cost, cap, tok
  end
  return out
end
-- A caller more than the maximum skew behind the refill timestamp of a
-- time-based item is refused, changing nothing and taking no ticket
-- (bucket.Align, bucket.SkewRetry): {0, retry, items..., 0, lag}, lag
-- being how far behind the furthest such bucket it is.
local lag = 0
for i = 1, n do
  local b = 10 * (i - 1)
  if S[b + 3] > 0 and S[b + 7] - now > skew and S[b + 7] - now > lag then
    lag = S[b + 7] - now
  end
end
if lag > 0 then
  local out, retry = { 0, 0 }, 0
  for i = 1, n do
    local b = 10 * (i - 1)
    local typ, cap, amt, per, cost, tok, last, u = S[b + 1], S[b + 2], S[b + 3], S[b + 4], S[b + 5], S[b + 6],
      S[b + 7], S[b + 10]
    local wait, at = 0, now
    if amt > 0 and now < last then
      at = last
    end
    if amt > 0 and at > last and at > u then -- the balance the item has now
      if not refillRaw then
        refillRaw, retryInRaw = core()
      end
      tok = refillRaw(cap, amt, per, tok, last, u, at)
    end
    if amt > 0 and last - now > skew then
      if not retryInRaw then
        refillRaw, retryInRaw = core()
      end
      wait = retryInRaw(cap, amt, per, tok, last, u, last, cost * 1000)
      if last - skew - now > wait then
        wait = last - skew - now
      end
      if wait > 3162240000000 then -- bucket.MaxRetryMs
        wait = 3162240000000
      end
    end
    if wait > retry then
      retry = wait
    end
    local o = 5 * i - 2
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = typ, cost, cap, tok, wait
  end
  out[2], out[3 + 5 * n], out[4 + 5 * n] = retry, 0, lag
  return out
end
-- Waiter queues (store.AcquireRequest.Queue), for concurrent items only:
-- Q[i] holds item i's queue keys, its tickets by place (score: the instant
-- the ticket was first taken; equal scores in member order, which is the
-- ids' byte order), by expiry, and their costs (a hash; a ticket without
-- one counts as 1). Dead tickets (expiry at or before now) are pruned;
-- A[i] counts the live tickets of others ahead of the request's place: its
-- earliest live ticket's instant (else now), then its id, and C[i] sums
-- their costs. A grant needs the balance to cover the request's cost plus
-- C[i] on every item.
local sformat = string.format
local Q, A, C, place, mine = nil, nil, nil, now, false
for i = 1, n do
  if S[10 * i - 9] == 3 then
    local ik = KEYS[2 * i]
    local j = string.find(ik, '}', 1, true)
    local tag, rest = string.sub(ik, 1, j), string.sub(ik, j + 4)
    local qk, xk = tag .. ':q' .. rest, tag .. ':qx' .. rest
    Q = Q or {}
    Q[i] = { qk, xk, call('ZCARD', qk) > 0, tag .. ':qc' .. rest }
    if Q[i][3] then
      -- At most 500 dead tickets (the earliest to expire) go per call, so
      -- that a huge backlog never blocks the server long: the rest go at
      -- later calls, and count as ahead until then.
      local dead = call('ZRANGE', xk, '-inf', sformat('%d', now), 'BYSCORE', 'LIMIT', 0, 500)
      if #dead > 0 then
        call('ZREM', xk, unpack(dead))
        call('ZREM', qk, unpack(dead))
        call('HDEL', Q[i][4], unpack(dead))
      end
      local sc = call('ZSCORE', qk, id)
      if sc then
        sc = sc + 0
        if not mine or sc < place then
          place, mine = sc, true
        end
      end
    end
  end
end
if Q then
  A, C = {}, {}
  local p = sformat('%d', place)
  for i, q in pairs(Q) do
    -- Costs are read for at most the bucket's capacity (or balance, when
    -- higher) in tokens plus one tickets ahead (each costs at least 1, so more deny the request
    -- anyway), and the tickets ahead are counted with ZCOUNT: a long queue
    -- (or a dead backlog not yet purged) costs O(log n) here.
    local top = math.max(S[10 * i - 8], S[10 * i - 4])
    local ahead, na, lim = {}, 0, (top - top % 1000) / 1000 + 1
    if q[3] then
      na = call('ZCOUNT', q[1], '-inf', '(' .. p)
      ahead = call('ZRANGE', q[1], '-inf', '(' .. p, 'BYSCORE', 'LIMIT', 0, lim)
      -- Tickets taken at the same instant go by id, compared byte by byte
      -- (Lua's string order follows the server's locale).
      for _, m in ipairs(call('ZRANGE', q[1], p, p, 'BYSCORE')) do
        for k = 1, #m do
          local x, y = string.byte(m, k), string.byte(id, k)
          if x ~= y then
            if x < y then
              na = na + 1
              if #ahead < lim then
                ahead[#ahead + 1] = m
              end
            end
            break
          end
        end
      end
    end
    local c = 0
    for k = 1, #ahead, 1000 do
      for _, v in ipairs(call('HMGET', q[4], unpack(ahead, k, math.min(k + 999, #ahead)))) do
        if v then
          c = c + v
        else
          c = c + 1
        end
      end
    end
    A[i], C[i] = na, c
  end
end
-- Take every item: bucket.Align, then bucket.Take (nothing is granted
-- before the end of a cooldown). The reply holds each item's balance after
-- refill (what a denial reports); on a grant S[b+6], S[b+8] become the
-- debited state.
local out = { 1, 0, 0, 0, 0, 0, 0 }
local granted, retry = true, 0
for i = 1, n do
  local b = 10 * (i - 1)
  local typ, cap, amt, per, cost, tok, last, u = S[b + 1], S[b + 2], S[b + 3], S[b + 4], S[b + 5], S[b + 6],
    S[b + 7], S[b + 10]
  local c, at = cost * 1000, now
  if amt > 0 and now < last then -- bucket.Align: Last never moves back
    at = last
  end
  local t, l
  if amt <= 0 or at <= last or at <= u then -- refillRaw's early returns
    t, l = tok, last
  elseif tok >= cap then
    t, l = cap, at
  else
    if not refillRaw then
      refillRaw, retryInRaw = core()
    end
    t, l = refillRaw(cap, amt, per, tok, last, u, at)
  end
  local wait = 0
  if t >= c + (C and C[i] or 0) * 1000 and at >= u then
    S[b + 6], S[b + 8] = t - c, l
  else
    granted = false
    if typ == 3 then -- bucket.ConcurrentRetry: poll, or until the earliest expiry
      local e = call('ZRANGE', KEYS[2 * i], 0, 0, 'WITHSCORES')
      wait = ARGV[4] + 0
      if e[2] then
        local earliest = e[2] + 0
        if earliest > now and earliest - now < wait then
          wait = earliest - now
        end
      end
      if wait < 1 then
        wait = 1
      end
    elseif amt > 0 then
      if not retryInRaw then
        refillRaw, retryInRaw = core()
      end
      wait = retryInRaw(cap, amt, per, tok, last, u, at, c)
    end
    if wait > retry then
      retry = wait
    end
  end
  local o = 5 * i - 2
  out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = typ, cost, cap, t, wait
end
if not granted then
  local ahead, qms = 0, ARGV[10] + 0
  if Q then
    local e = sformat('%d', now + qms)
    for i, q in pairs(Q) do
      if A[i] > ahead then
        ahead = A[i]
      end
      if qms > 0 then
        -- Take a ticket at the request's place, or renew the one it has.
        if not (q[3] and call('ZSCORE', q[1], id)) then
          call('ZADD', q[1], sformat('%d', place), id)
        end
        call('ZADD', q[2], e, id)
        call('HSET', q[4], id, S[10 * i - 5])
      end
    end
  end
  out[1], out[2], out[3 + 5 * n], out[4 + 5 * n] = 0, retry, ahead, 0
  return out
end
-- fmt formats an integer exactly for a command argument (as lib.lua's fmt):
-- a Lua number is exact in Redis's conversion only below 10^14.
local function fmt(x)
  if x < 1e14 and x > -1e14 then
    return x
  end
  return sformat('%d', x)
end
local exp = now + ARGV[2]
-- Turn the reply into the granted one in place (4 numbers per item, the
-- debited balance as remaining) and claim the operation (opclaim.lua)
-- before writing anything: a resend of a grant that already ran returns
-- that grant's answer here.
for i = 1, n do
  local o, q = 5 * i - 2, 4 * i - 1
  out[q], out[q + 1], out[q + 2], out[q + 3] = out[o], out[o + 1], out[o + 2], S[10 * i - 4]
end
for i = 3 + 4 * n, 2 + 5 * n do
  out[i] = nil
end
out[2] = exp
if record then
  out[1] = 2
end
local prev = opClaim(out)
if prev then
  return prev
end
if record then
  local e = fmt(exp)
  local h = { 'n', n, 'by', ARGV[6], 't0', fmt(now), 'exp', e }
  for i = 1, n do
    h[4 * i + 5] = 'd' .. i
    h[4 * i + 6] = ARGV[9 + 2 * i]
    h[4 * i + 7] = 'c' .. i
    h[4 * i + 8] = fmt(S[10 * i - 5])
    call('ZADD', KEYS[2 * i], e, id)
  end
  -- The buckets' incarnations (put.lua), so that a release never restores
  -- into a bucket deleted and re-created under the same name.
  for i = 1, n do
    h[#h + 1] = 'g' .. i
    h[#h + 1] = call('HGET', KEYS[2 * i - 1], 'g') or '0'
  end
  call('HSET', lkey, unpack(h))
  call('ZADD', ARGV[7] .. ':leases', e, id)
  if ARGV[8] ~= '' then
    call('HSET', ARGV[8], id, ARGV[7])
  end
end
-- Save the debited state.
for i = 1, n do
  local b = 10 * (i - 1)
  local t, l = S[b + 6], S[b + 8]
  if l == S[b + 7] then
    call('HSET', KEYS[2 * i - 1], 'v', fmt(t))
  else
    call('HSET', KEYS[2 * i - 1], 'v', fmt(t), 'l', fmt(l))
  end
end
-- A grant removes the request's tickets.
if Q then
  for _, q in pairs(Q) do
    if q[3] then
      call('ZREM', q[1], id)
      call('ZREM', q[2], id)
      call('HDEL', q[4], id)
    end
  end
end
return out
