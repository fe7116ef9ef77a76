-- Forgets a member (before its sandbox is destroyed), optionally only in an expected state.
-- KEYS: members hash, its pool's set, the unclaimed set, its ready set, the claims hash.
-- ARGV: memberId, expected state or ''.
-- Returns the removed member's JSON, or false when it was gone or in another state.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return false end
local member = cjson.decode(raw)
if ARGV[2] ~= '' and member.state ~= ARGV[2] then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if type(member.claimedBy) == 'string' and redis.call('HGET', KEYS[5], member.claimedBy) == ARGV[1] then
  redis.call('HDEL', KEYS[5], member.claimedBy)
end
return raw
