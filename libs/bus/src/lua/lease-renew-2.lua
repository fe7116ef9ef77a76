-- KEYS: global set, tenant set. ARGV: holder, expiry, now. Extends only a lease still held and
-- unexpired: a holder that lapsed (its slot may already be someone else's) cannot revive it.
-- Returns 1 when renewed.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[1])
return 1
