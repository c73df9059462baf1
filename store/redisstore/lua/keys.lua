-- keys.lua: key names and lease records, for the scripts that derive keys
-- from dimension names (appended after lib.lua).
-- Key helpers. The key space argument is "prefix\ntag\nids": with an
-- empty tag a dimension "vendor#rest" has the bucket key prefix{vendor}#rest
-- and the lease index prefix{vendor}:dz#rest; with a tag T (WithHashTag)
-- every dimension d has prefix{T}#d and prefix{T}:dz#d. ids, when not
-- empty, is the hash of live lease ids (id -> the key tag of its record)
-- that a standalone server with one tag per vendor keeps, so that an
-- acquisition finds a record under another vendor.
local TAG, IDS = '', ''
local function keyspace(arg)
  local i = string.find(arg, '\n', 1, true)
  local j = string.find(arg, '\n', i + 1, true)
  TAG, IDS = string.sub(arg, i + 1, j - 1), string.sub(arg, j + 1)
  return string.sub(arg, 1, i - 1)
end

-- An empty vendor ("#rpm") becomes "#", as in Go: Redis ignores empty tags.
local function splitDim(dim)
  if TAG ~= '' then
    return TAG, '#' .. dim
  end
  local v, rest = dim, ''
  local i = string.find(dim, '#', 1, true)
  if i then
    v, rest = string.sub(dim, 1, i - 1), string.sub(dim, i)
  end
  if v == '' then
    v = '#'
  end
  return v, rest
end

local function bucketKey(prefix, dim)
  local v, rest = splitDim(dim)
  return prefix .. '{' .. v .. '}' .. rest
end

local function dimIndexKey(prefix, dim)
  local v, rest = splitDim(dim)
  return prefix .. '{' .. v .. '}:dz' .. rest
end

-- queueKeys returns a dimension's waiter queue: the sorted set of tickets
-- by place (score: the instant the ticket was first taken; equal scores
-- are in member order, which for canonical lease ids is id order) and the
-- sorted set of the same tickets by expiry.
local function queueKeys(prefix, dim)
  local v, rest = splitDim(dim)
  local tag = prefix .. '{' .. v .. '}'
  return tag .. ':q' .. rest, tag .. ':qx' .. rest
end

-- readLease returns the items ({dim, cost, incarnation}), caller, created,
-- expiry and valid instant (0: an acquisition's lease) of the lease hash at
-- key, or nil.
local function readLease(key)
  local h = redis.call('HGETALL', key)
  if #h == 0 then
    return nil
  end
  local m = {}
  for i = 1, #h, 2 do
    m[h[i]] = h[i + 1]
  end
  local n = tonumber(m['n'])
  local items = {}
  for i = 1, n do
    items[i] = { m['d' .. i], tonumber(m['c' .. i]), m['g' .. i] or '0' }
  end
  return items, m['by'], tonumber(m['t0']), tonumber(m['exp']), tonumber(m['va'] or '0')
end

-- pruneVendor drops a vendor with no bucket and no lease record from the
-- registry (a standalone server only: the registry is in another slot).
-- vkey is the vendor's lease index, prefix{vendor}:leases.
local function pruneVendor(prefix, vkey)
  if redis.call('ZCARD', vkey) > 0 then
    return
  end
  local tag = string.sub(vkey, 1, -8) -- prefix{vendor}
  if redis.call('SCARD', tag .. ':buckets') == 0 then
    redis.call('SREM', prefix .. 'vendors', string.sub(tag, #prefix + 2, -2))
  end
end

-- removeLease deletes the lease at key (id in the vendor index vkey) and
-- restores its concurrent costs. It returns the restored entries
-- ({dim, cost, capped}) and the dimensions whose bucket is still the one
-- the lease was granted (same incarnation).
local function removeLease(prefix, key, vkey, id, items)
  local restored, live = {}, {}
  for _, it in ipairs(items) do
    local dim, cost = it[1], it[2]
    redis.call('ZREM', dimIndexKey(prefix, dim), id)
    local bk = bucketKey(prefix, dim)
    local L, tok, last = loadBucket(bk)
    -- A bucket re-created under the same name is another bucket: the
    -- lease's cost is not its to get back.
    if L and (redis.call('HGET', bk, 'g') or '0') ~= (it[3] or '0') then
      L = nil
    end
    if L then
      live[#live + 1] = dim
      if L.t == 3 then
        local t, capped = restore(L, tok, cost * 1000)
        saveState(bk, t, last)
        restored[#restored + 1] = { dim, cost, capped }
      end
    end
  end
  redis.call('DEL', key)
  redis.call('ZREM', vkey, id)
  if IDS ~= '' then
    redis.call('HDEL', IDS, id)
    pruneVendor(prefix, vkey)
  end
  return restored, live
end
