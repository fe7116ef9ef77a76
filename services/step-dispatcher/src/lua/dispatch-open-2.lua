--- @include "dispatch-state"
--- @include "job-record"
-- Opens a live sandbox for commands: it has no declared steps, so nothing is pushed; its commands
-- arrive from clients (libs/bus sandbox-exec) and run side by side. Idempotent: a redelivered
-- dispatch finds it open. A close asked before it became ready ends it here.
-- KEYS: state, job. ARGV: now, idle limit (ms), what idleness does (`close` | `pause`).
if status == 'finished' then return finished_reply() end
if status then return {'opened'} end
local cancel = redis.call('HGET', KEYS[2], JOB.cancelRequested)
if cancel then
  redis.call('HSET', st, 'status', 'finished', 'outcome', 'cancelled', 'reason', cancel, 'current', '', 'n', 0, 'live', 1)
  return {'finished', 'cancelled', cancel, 1}
end
redis.call('HSET', st, 'status', 'running', 'live', 1, 'n', 0, 'cursor', 0, 'current', '', 'startedAt', ARGV[1], 'idleMs', ARGV[2], 'onIdle', ARGV[3] or 'close')
redis.call('HSET', KEYS[2], JOB.readyAt, ARGV[1], JOB.lastActivityAt, ARGV[1])
redis.call('HINCRBY', KEYS[2], JOB.version, 1)
return {'opened'}
