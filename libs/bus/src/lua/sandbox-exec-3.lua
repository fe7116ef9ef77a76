--- @include "job-record"
-- Hands one command to a live sandbox's agent: exactly once, and only while the sandbox is ready.
-- Numbers it (cmd-<n>), records it (its history entry), counts it as running and as client
-- activity, drops the entry that falls out of the bounded history, and answers where the events
-- stream ended before it, so the caller follows the command from there: one round trip.
-- The step and the record come as JSON cut around their id (head .. id .. tail), which is the
-- first field of each, so the id is set here without decoding anything.
-- KEYS: job, in, events. ARGV: stepHead, stepTail, recordHead, recordTail, now, historyLimit.
-- Replies: {'pushed', id, lastEventId} | {'missing'} | {'not-sandbox'} | {'not-ready', state} | {'closing'}
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return {'not-sandbox'} end
if state ~= 'running' or not redis.call('HGET', KEYS[1], JOB.readyAt) then return {'not-ready', state} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 then return {'closing'} end
local n = redis.call('HINCRBY', KEYS[1], JOB.commandSeq, 1)
local id = 'cmd-' .. n
redis.call('HSET', KEYS[1], JOB.commandPrefix .. id, ARGV[3] .. id .. ARGV[4], JOB.lastActivityAt, ARGV[5])
redis.call('HINCRBY', KEYS[1], JOB.commandsRunning, 1)
redis.call('HINCRBY', KEYS[1], JOB.version, 1)
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
redis.call('LPUSH', KEYS[2], ARGV[1] .. id .. ARGV[2])
local limit = tonumber(ARGV[6])
if n > limit then
  local dropped = 'cmd-' .. (n - limit)
  redis.call('HDEL', KEYS[1], JOB.commandPrefix .. dropped, JOB.stepResultPrefix .. dropped)
end
local lastId = '0-0'
if last[1] then lastId = last[1][1] end
return {'pushed', id, lastId}
