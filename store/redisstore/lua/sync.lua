-- sync.lua: lower a time-based bucket's balance to a vendor's reported
-- remaining (bucket.Sync at the aligned time).
-- KEYS: bucket. ARGV: now, remaining millitokens, max skew ms.
-- Returns {-1} unknown, {-2} concurrent, else {1, before, after}.
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
local t, l = sync(L, tok, last, u, at, tonumber(ARGV[2]))
saveState(KEYS[1], t, l)
addCharged(KEYS[1], before - t)
return { 1, before, t }
