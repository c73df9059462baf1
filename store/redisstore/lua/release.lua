-- release.lua: delete a lease record and restore its concurrent costs once.
-- KEYS: lease hash, vendor lease index. ARGV: prefix, id, the channel of
-- notices of freed units ('' for none: store.FreedWatcher), published to
-- once per restored dimension.
-- Returns {0} when there is no record, else {1, dim, cost, capped, ...}.
local PREFIX = keyspace(ARGV[1])
local items = readLease(KEYS[1])
if not items then
  return { 0 }
end
local restored = removeLease(PREFIX, KEYS[1], KEYS[2], ARGV[2], items)
local out = { 1 }
for _, r in ipairs(restored) do
  if ARGV[3] and ARGV[3] ~= '' then
    redis.call('PUBLISH', ARGV[3], r[1])
  end
  out[#out + 1] = r[1]
  out[#out + 1] = r[2]
  out[#out + 1] = r[3] and 1 or 0
end
return out
