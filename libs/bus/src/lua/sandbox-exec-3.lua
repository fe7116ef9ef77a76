--- @include "job-record"
-- Hands one command to a live sandbox's agent: exactly once, and only while the sandbox is ready
-- (not closing: a close asked by a client, or decided by the dispatcher for idleness or lifetime).
-- Numbers it (cmd-<n>), records it (its history entry), counts it as running and as client
-- activity (Redis' clock, the one the idle check compares with), trims the history, and answers
-- where the events stream ended before it, so the caller follows the command from there: one
-- round trip. The history keeps the last `historyLimit` commands plus any older one still
-- running (dropping a running one would leave it counted as running forever); the number running
-- at once is bounded by `maxRunning`.
-- The step and the record come as JSON cut around their id (head .. id .. tail), which is the
-- first field of each, so the id is set here without decoding anything.
-- A background process ('1' in ARGV[7]) is recorded but not counted as running: it does not
-- keep the sandbox from going idle.
-- KEYS: job, in, events.
-- ARGV: stepHead, stepTail, recordHead, recordTail, historyLimit, maxRunning, background,
--       tenant ('' for any: a sandbox of another tenant is answered 'missing', as one that does
--       not exist), the prefix of the sandbox's result keys (wire resultKey with no step id).
-- Replies: {'pushed', id, lastEventId} | {'missing'} | {'not-sandbox'} | {'not-ready', state}
--          | {'closing'} | {'busy', running}
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if ARGV[8] and ARGV[8] ~= '' and redis.call('HGET', KEYS[1], JOB.tenant) ~= ARGV[8] then return {'missing'} end
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return {'not-sandbox'} end
if state ~= 'running' or not redis.call('HGET', KEYS[1], JOB.readyAt) then return {'not-ready', state} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 or redis.call('HEXISTS', KEYS[1], JOB.closing) == 1 then
  return {'closing'}
end
local running = tonumber(redis.call('HGET', KEYS[1], JOB.commandsRunning) or '0')
if ARGV[7] ~= '1' and running >= tonumber(ARGV[6]) then
  -- The counter drops as a step-dispatcher records each result: while none does (an outage, a
  -- notice lost with a dead dispatcher), commands that ended stay counted, and a sandbox running
  -- 3 was refused at 64. Before refusing, count what is really pending from the history: a
  -- command with no recorded result whose agent has not SET its result key either (it does when
  -- the command ends). Result keys share KEYS[2]'s prefix, so the job's slot (ARGV[9]: that prefix).
  local unrecorded, pending = 0, 0
  for _, c in ipairs(job_unrecorded_commands(KEYS[1])) do
    local ok, cmd = pcall(cjson.decode, redis.call('HGET', KEYS[1], c.field))
    if not (ok and type(cmd) == 'table' and cmd.background == true) then
      unrecorded = unrecorded + 1
      if redis.call('EXISTS', ARGV[9] .. c.id) == 0 then pending = pending + 1 end
    end
  end
  -- More counted than unrecorded is a leak for sure: corrected. Ended-but-unrecorded commands stay
  -- counted until a dispatcher records them (it decrements then; the idle check reads the count).
  if running > unrecorded then redis.call('HSET', KEYS[1], JOB.commandsRunning, unrecorded) end
  if pending >= tonumber(ARGV[6]) then return {'busy', pending} end
end
local n = redis.call('HINCRBY', KEYS[1], JOB.commandSeq, 1)
local id = 'cmd-' .. n
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], JOB.commandPrefix .. id, ARGV[3] .. id .. ARGV[4], JOB.lastActivityAt, now)
if ARGV[7] ~= '1' then redis.call('HINCRBY', KEYS[1], JOB.commandsRunning, 1) end
redis.call('HINCRBY', KEYS[1], JOB.version, 1)
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
redis.call('LPUSH', KEYS[2], ARGV[1] .. id .. ARGV[2])
local limit = tonumber(ARGV[5])
if n > limit then
  local dropped = 'cmd-' .. (n - limit)
  if redis.call('HEXISTS', KEYS[1], JOB.stepResultPrefix .. dropped) == 1 then
    redis.call('HDEL', KEYS[1], JOB.commandPrefix .. dropped, JOB.stepResultPrefix .. dropped)
  end
end
local lastId = '0-0'
if last[1] then lastId = last[1][1] end
return {'pushed', id, lastId}
