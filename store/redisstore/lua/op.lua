-- op.lua: the end of a script whose body, the function body() defined
-- before it, is applied at most once per operation: a command that
-- go-redis sends again after its reply was lost (a broken connection, a
-- read timeout) finds the first run's reply and returns it unchanged.
-- ARGV (the last two, removed before body() runs): the operation's key,
-- tagged like the script's keys so that it lives in their Cluster slot
-- ('' for none: body() simply runs), and its expiry in ms.
-- A reply whose first number is 1 or more, or the number 1 alone (applied;
-- a grant, with or without a lease record) is kept under the key until it
-- expires; a refusal, a denial or an answer that found nothing, which
-- changed nothing, is not kept, and a resend of it is decided again.
local opWindow = table.remove(ARGV)
local opKey = table.remove(ARGV)
if opKey ~= '' then
  local prev = redis.call('GET', opKey)
  if prev then
    return cmsgpack.unpack(prev)
  end
end
local opOut = body()
if opKey ~= '' and (opOut == 1 or type(opOut) == 'table' and opOut[1] >= 1) then
  redis.call('SET', opKey, cmsgpack.pack(opOut), 'PX', opWindow)
end
return opOut
