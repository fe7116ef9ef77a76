-- Deletes a tenant's volume unless a sandbox mounts it; its backend object is queued for the
-- reaper (the only holder of a backend here is a service, never the SDK).
-- KEYS: the tenant's volumes hash, the holds hash, the deleted list.
-- ARGV: name, `<tenant>/<name>`.
-- Returns {'deleted'}, {'missing'} or {'held', holders JSON}.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return {'missing'} end
local holders = redis.call('HGET', KEYS[2], ARGV[2])
if holders then return {'held', holders} end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[3], cjson.decode(raw).uid)
return {'deleted'}
