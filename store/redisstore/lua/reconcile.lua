-- reconcile.lua: process up to limit expired lease records of one vendor.
-- KEYS: vendor lease index. ARGV: prefix, now, limit.
-- Returns {more, restored, reclaimed, capped, orphans, dims...}.
local PREFIX = keyspace(ARGV[1])
local now = clock(ARGV[2])
local limit = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now), 'LIMIT', 0, limit + 1)
local tagEnd = string.find(KEYS[1], '}', 1, true)
local base = string.sub(KEYS[1], 1, tagEnd) .. ':lease:'
local more = 0
if #ids > limit then
  more = 1
end
local restoredN, reclaimed, capped, orphans = 0, 0, 0, 0
local dims, out = {}, {}
for i = 1, math.min(#ids, limit) do
  local id = ids[i]
  local key = base .. id
  local items = readLease(key)
  if not items then
    redis.call('ZREM', KEYS[1], id)
    if IDS ~= '' then
      redis.call('HDEL', IDS, id)
      pruneVendor(PREFIX, KEYS[1])
    end
  else
    local restored, live = removeLease(PREFIX, key, KEYS[1], id, items)
    restoredN = restoredN + 1
    if #live == 0 then
      orphans = orphans + 1
    else
      for _, d in ipairs(live) do
        if not dims[d] then
          dims[d] = true
          out[#out + 1] = d
        end
      end
      -- Reclaimed and capped count leases, not items.
      if #restored > 0 then
        reclaimed = reclaimed + 1
      end
      for _, r in ipairs(restored) do
        if r[3] then
          capped = capped + 1
          break
        end
      end
    end
  end
end
local res = { more, restoredN, reclaimed, capped, orphans }
for _, d in ipairs(out) do
  res[#res + 1] = d
end
return res
