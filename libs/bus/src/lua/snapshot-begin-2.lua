-- Reserves a snapshot against the tenant's quota and records it as `uploading`.
-- KEYS[1] the snapshot's record, KEYS[2] the tenant's usage hash.
-- ARGV: 1 max count, 2 max bytes, then field/value pairs of the record.
-- Returns {'ok'} or {'limit', name, limit, current}.
local count = tonumber(redis.call('HGET', KEYS[2], 'count') or '0')
-- Paused sandboxes' kept files count too: they are snapshots in the same store.
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
  + tonumber(redis.call('HGET', KEYS[2], 'pausedBytes') or '0')
if count >= tonumber(ARGV[1]) then
  return {'limit', 'count', ARGV[1], tostring(count)}
end
if bytes >= tonumber(ARGV[2]) then
  return {'limit', 'bytes', ARGV[2], tostring(bytes)}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'exists'}
end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('HINCRBY', KEYS[2], 'count', 1)
return {'ok'}
