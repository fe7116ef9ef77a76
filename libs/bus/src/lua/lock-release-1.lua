-- Gives up a short lock, unless someone else holds it by now (ours lapsed and was taken):
-- deleting theirs would let a third party in beside them. short-lock.ts.
-- KEYS: lock. ARGV: owner. Returns 1 when released.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
