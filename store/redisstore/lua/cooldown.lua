-- cooldown.lua: start a cooldown on a time-based bucket (bucket.Cooldown at
-- the aligned time), lasting ARGV[2] ms from that time.
-- KEYS: bucket. ARGV: now, duration ms, max skew ms.
-- Returns {-1} unknown, {-2} concurrent, else {1, before, after, until}.
local now = clock(ARGV[1])
local L, tok, last, u = loadBucket(KEYS[1])
if not L then
  return { -1 }
end
if L.t == 3 then
  return { -2 }
end
local at
tok, last, at = align(L, tok, last, now, tonumber(ARGV[3]))
local before = refill(L, tok, last, u, at)
local untl = at + tonumber(ARGV[2])
local t, l, nu = cooldown(L, tok, last, u, at, untl)
redis.call('HSET', KEYS[1], 'v', fmt(t), 'l', fmt(l), 'u', fmt(nu))
if untl > at then
  -- The balance it drops and the refill it forgoes (bucket.Cooldown).
  local drop = before
  if drop < 0 then
    drop = 0
  end
  addCharged(KEYS[1], drop + cooldownForgone(L, u, at, untl))
end
return { 1, before, t, nu }
