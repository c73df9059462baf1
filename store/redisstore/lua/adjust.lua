-- adjust.lua: settle one requests/tokens item of a lease.
-- KEYS: bucket, lease hash. ARGV: now, recorded (0/1), dimension, delta,
-- held, expires (0: unknown).
-- Returns {-1} unknown dimension, {-2} concurrent, {-3} unknown lease,
-- {-4} expired, {-5} dimension not in lease, {-6, held} refund above held,
-- else {1, held, applied, remaining}.
local now = clock(ARGV[1])
local L, tok, last = loadBucket(KEYS[1])
if not L then
  return { -1 }
end
if L.t == 3 then
  return { -2 }
end
local delta = tonumber(ARGV[4])
local held = tonumber(ARGV[5])
local slot = nil
if ARGV[2] == '1' then
  local items, _, _, exp = readLease(KEYS[2])
  if not items then
    return { -3 }
  end
  if exp <= now then
    return { -4 }
  end
  for i, it in ipairs(items) do
    if it[1] == ARGV[3] then
      slot, held = i, it[2]
    end
  end
  if not slot then
    return { -5 }
  end
else
  local exp = tonumber(ARGV[6])
  if exp ~= 0 and exp <= now then
    return { -4 }
  end
end
if delta < 0 and -delta > held then
  return { -6, held }
end
local t, l, applied = adjust(L, tok, last, now, delta * 1000)
saveState(KEYS[1], t, l)
if slot then
  redis.call('HSET', KEYS[2], 'c' .. slot, fmt(held + delta))
end
return { 1, held + delta, applied, t }
