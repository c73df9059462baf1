-- opclaim_end.lua: the end of a script started by opclaim.lua.
local opOut = body()
if opKey ~= '' and not opClaimed then
  local prev = redis.call('GET', opKey)
  if prev then
    return cmsgpack.unpack(prev)
  end
end
return opOut
