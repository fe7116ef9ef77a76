-- Takes a global and a tenant slot at once.
-- KEYS: global set, tenant set. ARGV: holder, now, expiry, globalLimit, tenantLimit.
-- Expired holders are dropped first, so a dead holder's slot comes back by itself.
-- Returns 1 granted (or renewed: acquiring twice is idempotent), 0 global full, -1 tenant full.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return -1 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
