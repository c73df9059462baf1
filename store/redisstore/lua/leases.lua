-- leases.lua: one page of the lease records of one vendor index, by expiry
-- then id (the sorted set's order).
-- KEYS: vendor lease index. ARGV: prefix, now, expired only (0/1),
-- dimension filter ('' none), want (the most records to return), page (the
-- most index entries to read), cursor score ('' from the start), cursor
-- id, skip (how many entries at the cursor score earlier pages read).
-- Returns {now, more (0/1), cursor score, cursor id, skip, per lease: id,
-- caller, created, expires, valid instant (0: none), n, dim, cost, ...};
-- more says the next page
-- starts at the returned cursor.
local now = clock(ARGV[2])
local max = '+inf'
if ARGV[3] == '1' then
  max = fmt(now)
end
local want, page = tonumber(ARGV[5]), tonumber(ARGV[6])
local min, cscore, cid, skip = '-inf', nil, ARGV[8], 0
if ARGV[7] ~= '' then
  min, cscore, skip = ARGV[7], tonumber(ARGV[7]), tonumber(ARGV[9])
end
local r = redis.call('ZRANGE', KEYS[1], min, max, 'BYSCORE', 'LIMIT', skip, page, 'WITHSCORES')
local tagEnd = string.find(KEYS[1], '}', 1, true)
local base = string.sub(KEYS[1], 1, tagEnd) .. ':lease:'
local out = { now, 0, ARGV[7], cid, skip }
local count, lastScore, lastID, same = 0, cscore, cid, skip
local i = 1
while i < #r and count < want do
  local id, score = r[i], tonumber(r[i + 1])
  i = i + 2
  if score == lastScore then
    same = same + 1
  else
    lastScore, same = score, 1
  end
  lastID = id
  -- An entry at or before the cursor was listed already (the set changed
  -- between pages).
  if not cscore or score > cscore or id > cid then
    local items, by, t0, exp, va = readLease(base .. id)
    local keep = items ~= nil and ARGV[4] == ''
    if items and not keep then
      for _, it in ipairs(items) do
        if it[1] == ARGV[4] then
          keep = true
        end
      end
    end
    if keep then
      out[#out + 1] = id
      out[#out + 1] = by
      out[#out + 1] = t0
      out[#out + 1] = exp
      out[#out + 1] = va
      out[#out + 1] = #items
      for _, it in ipairs(items) do
        out[#out + 1] = it[1]
        out[#out + 1] = it[2]
      end
      count = count + 1
    end
  end
end
if i < #r or #r == 2 * page then
  out[2] = 1
end
if lastScore then
  out[3], out[4], out[5] = string.format('%d', lastScore), lastID, same
end
return out
