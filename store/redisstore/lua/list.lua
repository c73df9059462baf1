-- list.lua: every bucket of one vendor, as peek does.
-- KEYS: vendor bucket set. ARGV: key space, now, max skew ms.
-- Returns {now, per bucket: name, t, c, a, p, k, d, tokens, last,
-- cooldown end, leases, next expiry, reserved, waiters, settlement counter}.
local PREFIX = keyspace(ARGV[1])
local now = clock(ARGV[2])
local skew = tonumber(ARGV[3])
local out = { now }
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local L, tok, last, u, res = loadBucket(bucketKey(PREFIX, name))
  if L then
    local zk = dimIndexKey(PREFIX, name)
    local nleases = redis.call('ZCARD', zk)
    local nexp = 0
    if nleases > 0 then
      nexp = tonumber(redis.call('ZRANGE', zk, 0, 0, 'WITHSCORES')[2])
    end
    local t, l, at = align(L, tok, last, now, skew)
    t, l = refill(L, t, l, u, at)
    local o = #out
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = name, L.t, L.cap, L.amt, L.per, L.k
    out[o + 7], out[o + 8], out[o + 9], out[o + 10], out[o + 11], out[o + 12] = L.d, t, l, u, nleases, nexp
    local _, qx = queueKeys(PREFIX, name)
    out[o + 13], out[o + 14] = res, redis.call('ZCOUNT', qx, '(' .. fmt(now), '+inf')
    out[o + 15] = loadCharged(bucketKey(PREFIX, name))
  end
end
return out
