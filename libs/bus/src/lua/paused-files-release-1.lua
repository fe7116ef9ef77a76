-- Gives back what a paused sandbox's kept files held of its tenant's snapshot bytes (idempotent).
-- KEYS[1] the tenant's snapshot usage hash. ARGV: 1 object id.
-- Returns 1 when released now, 0 when it was not counted.
local field = 'paused:' .. ARGV[1]
local size = redis.call('HGET', KEYS[1], field)
if not size then return 0 end
redis.call('HDEL', KEYS[1], field)
redis.call('HINCRBY', KEYS[1], 'pausedBytes', -tonumber(size))
return 1
