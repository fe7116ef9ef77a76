--- @include "dispatch-state"
--- @include "job-record"
-- Stores the job's rendered steps and pushes the first, unless the job was started before
-- (a redelivered dispatch answers with the step that was pushed) or its cancel was requested.
-- KEYS: state, in, job. ARGV: now, then per step: stepId, stepJSON, timeoutSeconds, continueOnError.
if status == 'finished' then return finished_reply() end
if status then
  local i = redis.call('HGET', st, 'cursor')
  return {'pushed', tonumber(i), redis.call('HGET', st, 'id:' .. i), redis.call('HGET', st, 'timeout:' .. i)}
end
local n = (#ARGV - 1) / 4
local cancel = redis.call('HGET', KEYS[3], JOB.cancelRequested)
if cancel then
  redis.call('HSET', st, 'status', 'finished', 'outcome', 'cancelled', 'reason', 'cancelled: ' .. cancel, 'current', '', 'n', n)
  return {'finished', 'cancelled', 'cancelled: ' .. cancel, 1}
end
local fields = {'status', 'running', 'n', n, 'cursor', 0, 'startedAt', ARGV[1]}
for i = 0, n - 1 do
  local a = 2 + i * 4
  table.insert(fields, 'id:' .. i); table.insert(fields, ARGV[a])
  table.insert(fields, 'step:' .. i); table.insert(fields, ARGV[a + 1])
  table.insert(fields, 'timeout:' .. i); table.insert(fields, ARGV[a + 2])
  table.insert(fields, 'coe:' .. i); table.insert(fields, ARGV[a + 3])
end
table.insert(fields, 'current'); table.insert(fields, ARGV[2])
redis.call('HSET', st, unpack(fields))
redis.call('LPUSH', KEYS[2], ARGV[3])
return {'pushed', 0, ARGV[2], ARGV[4]}
