-- KEYS: dispatch state, control. ARGV: schemaVersion, reason. Returns the stepId signalled or ''.
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return '' end
local current = redis.call('HGET', KEYS[1], 'current')
if not current or current == '' then return '' end
redis.call('LPUSH', KEYS[2], cjson.encode({schemaVersion = tonumber(ARGV[1]), kind = 'cancel', stepId = current, reason = ARGV[2]}))
return current
