--- @include "job-record"
-- Resumes a paused live sandbox: paused -> queued, under the same id, spec, labels and env, to be
-- admitted and started again like a new one; pod-lifecycle puts its kept files back before it
-- takes commands (pausedFiles stays until then). What belonged to its last life goes: where it
-- ran, its readiness, its closing mark, its count of running commands (the pause stopped them),
-- and the dispatcher's state of that life (the next open starts a fresh one).
-- KEYS: job, events, dispatch state. ARGV: tenant ('' for any), now, events maxlen.
-- Replies: {'resumed', resumes, transitionJson} | {'missing'} | {'not-sandbox'}
--          | {'not-paused', state} | {'closing'} | {'pausing'}
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], JOB.tenant) ~= ARGV[1] then return {'missing'} end
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return {'not-sandbox'} end
if state ~= 'paused' then return {'not-paused', state} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 then return {'closing'} end
-- Its sandbox is still being torn down and its files kept (pod-lifecycle clears `sandbox` once
-- they are): a resume now would start without them, and the teardown would then end the new life.
if redis.call('HEXISTS', KEYS[1], JOB.sandbox) == 1 then return {'pausing'} end
redis.call('HDEL', KEYS[1], JOB.closing, JOB.readyAt, JOB.sandbox, JOB.disk, JOB.pausedAt, JOB.unpausable,
  JOB.endsAt, JOB.maxEndsAt)
redis.call('HSET', KEYS[1], JOB.commandsRunning, 0)
local resumes = redis.call('HINCRBY', KEYS[1], JOB.resumes, 1)
redis.call('DEL', KEYS[3])
local json = job_set_state(KEYS[1], KEYS[2], 'paused', 'queued', ARGV[2], 'resume', ARGV[3])
return {'resumed', resumes, json}
