-- cancel.lua: cancel a recorded reservation: bucket.Unreserve on each item
-- whose bucket is still the one reserved (same incarnation), then delete
-- the record.
-- KEYS: lease hash, vendor lease index. ARGV: key space, id, now, max skew
-- ms.
-- Returns {0} when there is no record, {-1} when the record is an
-- acquisition's lease, else {1, dim, amount, ...} (what went back, in the
-- reservation's order).
local PREFIX = keyspace(ARGV[1])
local items, _, _, _, va = readLease(KEYS[1])
if not items then
  return { 0 }
end
if va == 0 then
  return { -1 }
end
local now = clock(ARGV[3])
local skew = tonumber(ARGV[4])
local out = { 1 }
for _, it in ipairs(items) do
  local bk = bucketKey(PREFIX, it[1])
  local L, tok, last, u, res = loadBucket(bk)
  if L and L.t ~= 3 and (redis.call('HGET', bk, 'g') or '0') == it[3] then
    local at, back
    tok, last, at = align(L, tok, last, now, skew)
    tok, last, back = unreserve(L, tok, last, u, res, at, it[2] * 1000, va)
    saveState(bk, tok, last)
    if back > 0 then
      out[#out + 1] = it[1]
      out[#out + 1] = back
    end
  end
end
removeLease(PREFIX, KEYS[1], KEYS[2], ARGV[2], items)
return out
