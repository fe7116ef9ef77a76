--- @include "dispatch-state"
-- Ends a job from outside its steps (job timeout, lost sandbox, cancel backstop) and tells the
-- agent to kill the running step. Idempotent: a finished job keeps its first outcome.
-- KEYS: state, control. ARGV: outcome, reason.
if not status then return {'unknown'} end
if status == 'finished' then return finished_reply() end
local current = redis.call('HGET', st, 'current')
if current and current ~= '' then
  redis.call('LPUSH', KEYS[2], cjson.encode({schemaVersion = 1, kind = 'cancel', stepId = current, reason = ARGV[2]}))
end
redis.call('HSET', st, 'status', 'finished', 'outcome', ARGV[1], 'reason', ARGV[2], 'current', '')
return {'finished', ARGV[1], ARGV[2], 1}
