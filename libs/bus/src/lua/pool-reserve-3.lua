-- Takes a place for a new warm pool member, bounded by the pool's max and the global capacity:
-- the member counts from this moment (starting), so members that fail to become ready are
-- replaced within the bound, never added on top of it.
-- KEYS: members hash, the pool's set, the unclaimed set.
-- ARGV: memberId, max, capacity, member JSON (state `starting`).
-- Returns 1 reserved, 0 the pool is at its max, -1 the global capacity is used up.
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return 0 end
if redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1
