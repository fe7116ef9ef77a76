-- A starting member whose agent announced itself becomes claimable.
-- KEYS: members hash, the ready set of its pool and spec version. ARGV: memberId, now (ms).
-- Returns 1 ready, 0 gone or not starting (the caller then destroys what it started).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local member = cjson.decode(raw)
if member.state ~= 'starting' then return 0 end
member.state = 'ready'
member.readyAt = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(member))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
