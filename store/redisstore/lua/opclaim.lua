-- opclaim.lua: the start of a script that applies a grant at most once per
-- operation, like op.lua, with one command on the fresh path instead of
-- two: the body, the function body() defined after this, builds its
-- answer, and before it writes anything calls opClaim(out), which keeps the
-- answer under the operation's key with SET NX and returns the answer kept
-- by an earlier run of the same operation, if any, for body() to return
-- unchanged instead of writing. opclaim_end.lua checks the key only when
-- body() answered without a grant (a resend of a grant that now finds no
-- balance, or finds its own lease record, is answered as the grant was).
-- ARGV (the last two, removed before body() runs): the operation's key
-- ('' for none) and its expiry in ms.
local opWindow = table.remove(ARGV)
local opKey = table.remove(ARGV)
local opClaimed = false
local function opClaim(out)
  if opKey == '' then
    return nil
  end
  opClaimed = true
  if redis.call('SET', opKey, cmsgpack.pack(out), 'NX', 'PX', opWindow) then
    return nil
  end
  return cmsgpack.unpack(redis.call('GET', opKey))
end
