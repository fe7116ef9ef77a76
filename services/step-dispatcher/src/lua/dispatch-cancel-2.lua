--- @include "dispatch-state"
-- A cancel request (the flag is already on the job record): tells the agent to kill the step
-- that runs now. Same compare-and-push as dispatch-finish: the caller's message names the step it
-- believes runs; {'stale', current} names the one that does, and the caller asks again.
-- The job itself ends when the step's cancelled result arrives (dispatch-advance sees the flag),
-- or by the backstop deadline the caller leaves after {'signalled', stepId}.
-- KEYS: state, control. ARGV: running stepId, cancel message.
if not status then return {'unknown'} end
if status == 'finished' then return finished_reply() end
local current = redis.call('HGET', st, 'current') or ''
if current ~= ARGV[1] then return {'stale', current} end
if current ~= '' then redis.call('LPUSH', KEYS[2], ARGV[2]) end
return {'signalled', current}
