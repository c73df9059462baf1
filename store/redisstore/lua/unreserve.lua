-- unreserve.lua: cancel a reservation without a record, as its caller
-- describes it: bucket.Unreserve on each item's bucket that exists and is
-- not concurrent.
-- KEYS: per item: bucket. ARGV: now, max skew ms, valid instant, then per
-- item: dimension, cost (the tokens the reservation holds now).
-- Returns {cancelled (now before the valid instant: 0/1), dim, amount, ...}.
local now = clock(ARGV[1])
local skew, va = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = { 0 }
if now < va then
  out[1] = 1
end
for i = 1, #KEYS do
  local L, tok, last, u, res = loadBucket(KEYS[i])
  if L and L.t ~= 3 then
    local at, back
    tok, last, at = align(L, tok, last, now, skew)
    tok, last, back = unreserve(L, tok, last, u, res, at, tonumber(ARGV[3 + 2 * i]) * 1000, va)
    saveState(KEYS[i], tok, last)
    if back > 0 then
      out[#out + 1] = ARGV[2 + 2 * i]
      out[#out + 1] = back
    end
  end
end
return out
