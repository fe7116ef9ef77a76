-- Extends a log archive job lease only while this replica still holds it (it may have expired
-- during a pause and been taken by another replica, which then owns the job).
-- KEYS: lease. ARGV: owner, lease ms. Returns 1 when renewed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
