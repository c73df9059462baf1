-- delete.lua: remove a bucket and its lease index; its lease records become
-- orphans for reconcile.
-- KEYS: bucket, dim lease index, vendor bucket set. ARGV: name.
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return 1
