-- adjust.lua: settle one requests/tokens item of a lease.
-- KEYS: bucket, lease hash. ARGV: now, recorded (0/1), dimension, delta,
-- held, expires (0: unknown), max skew ms.
-- Returns {-1} unknown dimension, {-2} concurrent, {-3} unknown lease,
-- {-5} dimension not in lease, {-4} refund on an expired lease, {-6, held}
-- refund above held, else {1, held, applied, remaining}. A charge on an
-- expired lease (late usage) is applied; the held cost grows only by the
-- whole tokens the debt floor let it take (store.HeldAfter).
local now = clock(ARGV[1])
local L, tok, last, u, res = loadBucket(KEYS[1])
if not L then
  return { -1 }
end
if L.t == 3 then
  return { -2 }
end
local delta = tonumber(ARGV[4])
local held = tonumber(ARGV[5])
local exp = tonumber(ARGV[6])
local slot = nil
if ARGV[2] == '1' then
  local items, _, _, e = readLease(KEYS[2])
  if not items then
    return { -3 }
  end
  for i, it in ipairs(items) do
    if it[1] == ARGV[3] then
      slot, held = i, it[2]
    end
  end
  if not slot then
    return { -5 }
  end
  exp = e
end
if delta < 0 and exp ~= 0 and exp <= now then
  return { -4 }
end
if delta < 0 and -delta > held then
  return { -6, held }
end
local at
tok, last, at = align(L, tok, last, now, tonumber(ARGV[7]))
local t, l, applied = adjust(L, tok, last, u, res, at, delta * 1000)
saveState(KEYS[1], t, l)
addCharged(KEYS[1], applied)
if delta < 0 then
  held = held + delta
elseif applied > 0 then
  held = held + (applied - applied % 1000) / 1000
end
if slot then
  redis.call('HSET', KEYS[2], 'c' .. slot, fmt(held))
end
return { 1, held, applied, t }
