-- Creates a tenant's volume within its quota (count and bytes), in one step so two concurrent
-- creates cannot both pass the check.
-- KEYS: the tenant's volumes hash, the quota hash.
-- ARGV: name, record JSON, size in bytes it counts for, tenant, default max count, default max bytes.
-- Returns {'created'}, {'exists', record JSON}, {'count', max} or {'bytes', max, used}.
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return {'exists', existing} end
local maxCount = tonumber(ARGV[5])
local maxBytes = tonumber(ARGV[6])
local quota = redis.call('HGET', KEYS[2], ARGV[4]) or redis.call('HGET', KEYS[2], '*')
if quota then
  local q = cjson.decode(quota)
  if q.maxCount then maxCount = tonumber(q.maxCount) end
  if q.maxBytes then maxBytes = tonumber(q.maxBytes) end
end
if redis.call('HLEN', KEYS[1]) >= maxCount then return {'count', tostring(maxCount)} end
local used = 0
for _, raw in ipairs(redis.call('HVALS', KEYS[1])) do
  local v = cjson.decode(raw)
  used = used + (tonumber(v.countedBytes) or 0)
end
if used + tonumber(ARGV[3]) > maxBytes then return {'bytes', tostring(maxBytes), tostring(used)} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {'created'}
