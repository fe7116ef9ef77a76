--- @include "job-record"
-- Records a cancel request on the record (once). A job still queued is cancelled in the same
-- step: nothing holds it yet, so no later check could miss the flag. So is a paused sandbox: it
-- holds no slot and no sandbox (the reaper discards the files it kept).
-- KEYS: job hash, job events stream. ARGV: reason, now, maxlen.
-- Returns {'missing'} | {'terminal', state} | {'repeat', state} | {'requested', state, eventJson}
--   | {'cancelled', state, eventJson, transitionJson}.
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if TERMINAL[state] then return {'terminal', state} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 then return {'repeat', state} end
redis.call('HSET', KEYS[1], JOB.cancelRequested, ARGV[1], JOB.updatedAt, ARGV[2])
redis.call('HINCRBY', KEYS[1], JOB.version, 1)
local json = job_event(KEYS[1], 'cancel-requested', state, state, tonumber(ARGV[2]), ARGV[1])
job_append_event(KEYS[1], KEYS[2], ARGV[3], json)
if state == 'queued' or state == 'paused' then
  return {'cancelled', state, json, job_set_state(KEYS[1], KEYS[2], state, 'cancelled', ARGV[2], ARGV[1], ARGV[3])}
end
return {'requested', state, json}
