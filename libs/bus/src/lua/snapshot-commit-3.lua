-- Marks an uploaded snapshot `ready` once its bytes fit the tenant's quota; else drops it.
-- KEYS[1] record, KEYS[2] usage, KEYS[3] the tenant's index.
-- ARGV: 1 max bytes, 2 size, 3 createdAt (ms), 4 '1' to list it in the index ('0': a fork's
-- temporary snapshot, never listed), then field/value pairs to set.
-- Returns {'ok'}, {'gone'} (the reaper dropped it meanwhile) or {'limit', 'bytes', limit, current}.
if redis.call('HGET', KEYS[1], 'state') ~= 'uploading' then
  return {'gone'}
end
-- Paused sandboxes' kept files count too: they are snapshots in the same store.
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
  + tonumber(redis.call('HGET', KEYS[2], 'pausedBytes') or '0')
local size = tonumber(ARGV[2])
if bytes + size > tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('HINCRBY', KEYS[2], 'count', -1)
  return {'limit', 'bytes', ARGV[1], tostring(bytes + size)}
end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'state', 'ready', 'sizeBytes', ARGV[2], unpack(fields))
redis.call('HINCRBY', KEYS[2], 'bytes', size)
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[3], redis.call('HGET', KEYS[1], 'snapshotId'))
end
return {'ok'}
