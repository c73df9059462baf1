-- peek.lua: the state of buckets without changing them.
-- KEYS: per bucket: bucket key, dim lease index, waiter queue by expiry.
-- ARGV: now, max skew ms.
-- Returns {now, per bucket: found(0/1), t, c, a, p, k, d, tokens, last,
-- cooldown end, leases, next expiry, reserved, waiters, settlement counter}.
local now = clock(ARGV[1])
local skew = tonumber(ARGV[2])
local out = { now }
for i = 1, #KEYS, 3 do
  local L, tok, last, u, res = loadBucket(KEYS[i])
  if not L then
    for _ = 1, 15 do
      out[#out + 1] = 0
    end
  else
    local nleases = redis.call('ZCARD', KEYS[i + 1])
    local nexp = 0
    if nleases > 0 then
      nexp = tonumber(redis.call('ZRANGE', KEYS[i + 1], 0, 0, 'WITHSCORES')[2])
    end
    local t, l, at = align(L, tok, last, now, skew)
    t, l = refill(L, t, l, u, at)
    local o = #out
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = 1, L.t, L.cap, L.amt, L.per, L.k
    out[o + 7], out[o + 8], out[o + 9], out[o + 10], out[o + 11], out[o + 12] = L.d, t, l, u, nleases, nexp
    out[o + 13], out[o + 14] = res, redis.call('ZCOUNT', KEYS[i + 2], '(' .. fmt(now), '+inf')
    out[o + 15] = loadCharged(KEYS[i])
  end
end
return out
