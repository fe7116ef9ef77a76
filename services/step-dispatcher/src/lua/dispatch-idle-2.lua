--- @include "dispatch-state"
--- @include "job-record"
-- Closes (or, when its spec says `onIdle: 'pause'`, pauses) a live sandbox that is idle: no client call within its idle limit and no command
-- running (background work inside a command counts as running; a finished command's end counts
-- as activity). Otherwise answers when to look again. Atomic with the exec script's checks, so
-- a command pushed a moment ago keeps the sandbox open.
-- KEYS: state, job. ARGV: now.
-- Replies: {'later', atMs} | {'finished', outcome, reason, newly} | {'unknown'}
if not status then return {'unknown'} end
if status == 'finished' then return finished_reply() end
local now = tonumber(ARGV[1])
local idleMs = tonumber(redis.call('HGET', st, 'idleMs'))
local running = tonumber(redis.call('HGET', KEYS[2], JOB.commandsRunning) or '0')
if running > 0 then return {'later', now + idleMs} end
local last = tonumber(redis.call('HGET', KEYS[2], JOB.lastActivityAt) or redis.call('HGET', st, 'startedAt'))
if now < last + idleMs then return {'later', last + idleMs} end
-- In the same step, so no command is taken between this decision and the close (sandbox-exec):
-- what was written up to here is all there is, and a pause keeps it.
if redis.call('HGET', st, 'onIdle') == 'pause' then
  redis.call('HSET', st, 'status', 'finished', 'outcome', 'paused', 'reason', 'idle', 'current', '')
  redis.call('HSET', KEYS[2], JOB.closing, 'pause')
  return {'finished', 'paused', 'idle', 1}
end
redis.call('HSET', st, 'status', 'finished', 'outcome', 'succeeded', 'reason', 'idle', 'current', '')
redis.call('HSET', KEYS[2], JOB.closing, 'idle')
return {'finished', 'succeeded', 'idle', 1}
