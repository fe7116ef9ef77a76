-- Counts a paused sandbox's kept files in its tenant's snapshot bytes (idempotent per object).
-- KEYS[1] the tenant's snapshot usage hash. ARGV: 1 object id, 2 its stored size.
-- Returns 1 when counted now, 0 when it was counted already.
local field = 'paused:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], field) == 1 then return 0 end
redis.call('HSET', KEYS[1], field, ARGV[2])
redis.call('HINCRBY', KEYS[1], 'pausedBytes', tonumber(ARGV[2]))
return 1
