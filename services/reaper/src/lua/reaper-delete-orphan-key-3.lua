-- Deletes a per-job key that belongs to no job: no record, no live heartbeat, and untouched for
-- at least the grace period (a producer that writes steps before creating a record, or an agent
-- run by hand, keeps its keys busy). KEYS: the key, job hash, heartbeat. ARGV: grace (s).
-- Returns 1 when deleted.
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local ok, idle = pcall(redis.call, 'OBJECT', 'IDLETIME', KEYS[1])
if not ok or not idle then return 0 end
if idle < tonumber(ARGV[1]) then return 0 end
redis.call('UNLINK', KEYS[1])
return 1
