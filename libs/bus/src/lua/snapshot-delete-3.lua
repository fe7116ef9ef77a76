-- Removes a snapshot's record and gives back what it held of the tenant's quota.
-- KEYS[1] record, KEYS[2] usage, KEYS[3] index. ARGV[1] snapshot id.
-- Returns the state it had, or false when there was no record.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return false end
local size = tonumber(redis.call('HGET', KEYS[1], 'sizeBytes') or '0')
redis.call('HINCRBY', KEYS[2], 'count', -1)
if state == 'ready' then redis.call('HINCRBY', KEYS[2], 'bytes', -size) end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return state
