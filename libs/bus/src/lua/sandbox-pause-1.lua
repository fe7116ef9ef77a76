--- @include "job-record"
-- Asks a ready live sandbox to pause: from this step on it takes no more commands (the exec
-- script refuses a record with `closing` set), so nothing can be taken between the decision and
-- the pause. Answers the commands it still has without a result (background processes and
-- terminals included): the pause stops them, and its caller names them. A command whose result
-- the agent SET already (its end, not yet recorded by a dispatcher) is over, not stopped.
-- KEYS: job. ARGV: tenant ('' for any: another tenant's sandbox is answered 'missing'), pause mark,
-- the prefix of the sandbox's result keys (wire resultKey with no step id; the job's slot).
-- Replies: {'requested', resumes, id...} | {'repeat', resumes, id...} | {'paused'} | {'missing'}
--          | {'not-sandbox'} | {'closing', state} | {'not-ready', state} | {'unpausable', why}
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], JOB.tenant) ~= ARGV[1] then return {'missing'} end
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return {'not-sandbox'} end
if state == 'paused' then return {'paused'} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 then return {'closing', state} end
local closing = redis.call('HGET', KEYS[1], JOB.closing)
if closing and closing ~= ARGV[2] then return {'closing', state} end
if state ~= 'running' or not redis.call('HGET', KEYS[1], JOB.readyAt) then return {'not-ready', state} end
local why = redis.call('HGET', KEYS[1], JOB.unpausable)
if why then return {'unpausable', why} end
local resumes = tonumber(redis.call('HGET', KEYS[1], JOB.resumes) or '0')
local reply = {closing and 'repeat' or 'requested', resumes}
for _, c in ipairs(job_unrecorded_commands(KEYS[1])) do
  if redis.call('EXISTS', ARGV[3] .. c.id) == 0 then table.insert(reply, c.id) end
end
if not closing then
  redis.call('HSET', KEYS[1], JOB.closing, ARGV[2])
  redis.call('HINCRBY', KEYS[1], JOB.version, 1)
end
return reply
