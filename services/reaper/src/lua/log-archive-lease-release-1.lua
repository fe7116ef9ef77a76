-- Gives up a log archive job lease, unless another replica holds it by now.
-- KEYS: lease. ARGV: owner. Returns 1 when released.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
