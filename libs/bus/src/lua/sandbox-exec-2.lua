--- @include "job-record"
-- Hands one command to a live sandbox's agent: exactly once, and only while the sandbox is ready.
-- Records the command (its history entry), counts it as running and as client activity, and
-- drops the entry that falls out of the bounded history.
-- KEYS: job, in. ARGV: commandId, stepJSON, commandJSON, now, droppedId ('' = none).
-- Replies: {'pushed'} | {'missing'} | {'not-sandbox'} | {'not-ready', state} | {'closing'} | {'exists'}
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return {'not-sandbox'} end
if state ~= 'running' or not redis.call('HGET', KEYS[1], JOB.readyAt) then return {'not-ready', state} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 then return {'closing'} end
if redis.call('HSETNX', KEYS[1], JOB.commandPrefix .. ARGV[1], ARGV[3]) == 0 then return {'exists'} end
redis.call('HINCRBY', KEYS[1], JOB.commandsRunning, 1)
redis.call('HSET', KEYS[1], JOB.lastActivityAt, ARGV[4])
redis.call('HINCRBY', KEYS[1], JOB.version, 1)
redis.call('LPUSH', KEYS[2], ARGV[2])
if ARGV[5] ~= '' then
  redis.call('HDEL', KEYS[1], JOB.commandPrefix .. ARGV[5], JOB.stepResultPrefix .. ARGV[5])
end
return {'pushed'}
