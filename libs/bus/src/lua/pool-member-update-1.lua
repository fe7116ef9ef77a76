-- Rewrites a member's record only while it is still in the expected state, so a member removed
-- (deadline, resize) or claimed meanwhile is not brought back by a late writer.
-- KEYS: members hash. ARGV: memberId, expected state, new member JSON.
-- Returns 1 written, 0 gone or in another state.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
if cjson.decode(raw).state ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
