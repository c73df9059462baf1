-- leases.lua: lease records of one vendor index, by expiry.
-- KEYS: vendor lease index. ARGV: prefix, now, expired only (0/1),
-- dimension filter ('' none), limit (0 none).
-- Returns {now, per lease: id, caller, created, expires, n, dim, cost, ...}.
local now = clock(ARGV[2])
local max = '+inf'
if ARGV[3] == '1' then
  max = fmt(now)
end
local limit = tonumber(ARGV[5])
local out = { now }
local count = 0
local tagEnd = string.find(KEYS[1], '}', 1, true)
local base = string.sub(KEYS[1], 1, tagEnd) .. ':lease:'
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', max)) do
  local items, by, t0, exp = readLease(base .. id)
  if items then
    local keep = ARGV[4] == ''
    for _, it in ipairs(items) do
      if it[1] == ARGV[4] then
        keep = true
      end
    end
    if keep then
      out[#out + 1] = id
      out[#out + 1] = by
      out[#out + 1] = t0
      out[#out + 1] = exp
      out[#out + 1] = #items
      for _, it in ipairs(items) do
        out[#out + 1] = it[1]
        out[#out + 1] = it[2]
      end
      count = count + 1
      if limit > 0 and count >= limit then
        break
      end
    end
  end
end
return out
