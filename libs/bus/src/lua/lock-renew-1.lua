-- Extends a short lock only while its owner still holds it (it may have expired during a pause
-- and been taken by someone else, who then owns what it guards). short-lock.ts.
-- KEYS: lock. ARGV: owner, ttl ms. Returns 1 when renewed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
