--- @include "dispatch-state"
--- @include "job-record"
-- Opens a live sandbox for commands: it has no declared steps, so nothing is pushed; its commands
-- arrive from clients (libs/bus sandbox-exec) and run side by side. Idempotent: a redelivered
-- dispatch finds it open. A close asked before it became ready ends it here.
-- Becoming ready is announced on the sandbox's events stream in the same script (a `ready` entry,
-- not a job event: a wake-up for the SDK's readiness wait, which then reads the record), so a
-- waiter that took the stream's last id before it read the record cannot miss it.
-- Its end (endsAt) and the cap a client may move it to (maxEndsAt) are set here too, with
-- readyAt: a client woken by the `ready` entry may move the end at once (setTimeout), and a write
-- of the end after this script would undo that move.
-- KEYS: state, job, the sandbox's events stream. ARGV: now, idle limit (ms), what idleness does
-- (`close` | `pause`), the events stream's MAXLEN, endsAt (ms), maxEndsAt (ms).
if status == 'finished' then return finished_reply() end
if status then return {'opened'} end
local cancel = redis.call('HGET', KEYS[2], JOB.cancelRequested)
if cancel then
  redis.call('HSET', st, 'status', 'finished', 'outcome', 'cancelled', 'reason', cancel, 'current', '', 'n', 0, 'live', 1)
  return {'finished', 'cancelled', cancel, 1}
end
redis.call('HSET', st, 'status', 'running', 'live', 1, 'n', 0, 'cursor', 0, 'current', '', 'startedAt', ARGV[1], 'idleMs', ARGV[2], 'onIdle', ARGV[3] or 'close')
redis.call('HSET', KEYS[2], JOB.readyAt, ARGV[1], JOB.lastActivityAt, ARGV[1])
if ARGV[5] and ARGV[6] then redis.call('HSET', KEYS[2], JOB.endsAt, ARGV[5], JOB.maxEndsAt, ARGV[6]) end
redis.call('HINCRBY', KEYS[2], JOB.version, 1)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4] or 10000, '*', JOB.readyMarkField, ARGV[1])
return {'opened'}
