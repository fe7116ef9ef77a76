--- @include "dispatch-state"
-- Ends a job from outside its steps (job timeout, lost sandbox, cancel backstop) and tells the
-- agent to kill the running step. Idempotent: a finished job keeps its first outcome.
-- The cancel message comes encoded by the caller (wire encodeCancel) for the step it believes
-- runs; when another step runs (or none), the reply {'stale', current} names it and the caller
-- asks again, so the message always names the step that runs at the moment of the finish.
-- KEYS: state, control. ARGV: outcome, reason, running stepId ('' = none), cancel message.
if not status then return {'unknown'} end
if status == 'finished' then return finished_reply() end
local current = redis.call('HGET', st, 'current') or ''
if current ~= ARGV[3] then return {'stale', current} end
if current ~= '' then redis.call('LPUSH', KEYS[2], ARGV[4]) end
redis.call('HSET', st, 'status', 'finished', 'outcome', ARGV[1], 'reason', ARGV[2], 'current', '')
return {'finished', ARGV[1], ARGV[2], 1}
