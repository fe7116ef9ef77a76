--- @include "job-record"
-- Appends a `progress` JobEvent (a long create phase advancing: an image pull) to a job that is
-- still starting, the way every job event goes (stream entry + its copy on the record). A job
-- that left `starting` meanwhile (cancelled, failed) gets none: its timeline has moved on.
-- KEYS: job hash, job events stream. ARGV: progress JSON, message, now, maxlen.
-- Returns 1 when appended, 0 when the job is missing or not starting.
local state = redis.call('HGET', KEYS[1], JOB.state)
if state ~= 'starting' then return 0 end
local event = cjson.decode(job_event(KEYS[1], 'progress', state, state, tonumber(ARGV[3]), ARGV[2]))
event.progress = cjson.decode(ARGV[1])
job_append_event(KEYS[1], KEYS[2], ARGV[4], cjson.encode(event))
return 1
