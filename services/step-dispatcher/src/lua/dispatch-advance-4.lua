--- @include "dispatch-state"
--- @include "job-record"
-- Records the result of the running step and pushes the next one: the only way a step is ever
-- pushed after the first. Idempotent on redelivery: a notice for a step that is no longer the
-- running one changes nothing, so no step is pushed (or run) twice.
-- KEYS: state, in, the step's result key (wire resultKey), job. ARGV: stepId, resultJSON ("" =
-- take it from the result key).

-- The result key is the sandbox's own to write: its agent SETs it. This script reads that one
-- key and nothing else the sandbox wrote, and never more than RESULT_MAX_BYTES of it, so a
-- sandbox that writes many or huge values (under any of its keys) cannot make it, which blocks
-- Redis for every tenant, do more than one bounded read per step.
local RESULT_MAX_BYTES = 17 * 1024 * 1024

-- Takes the step's result off its key; nil when it is not there (yet). A value that is not a
-- string, or is larger than any result can be, is dropped: its step ends at its deadline.
local function take_result()
  local kind = redis.call('TYPE', KEYS[3]).ok
  if kind == 'none' then return nil end
  if kind ~= 'string' or redis.call('STRLEN', KEYS[3]) > RESULT_MAX_BYTES then
    redis.call('UNLINK', KEYS[3])
    return nil
  end
  local raw = redis.call('GET', KEYS[3])
  redis.call('UNLINK', KEYS[3])
  return raw
end

if not status then return {'unknown'} end
-- A live sandbox's commands are recorded even after it closed: those killed by the close end
-- after it, and must not stay counted as running.
if redis.call('HGET', st, 'live') == '1' then
  -- A live sandbox's command (its commands run side by side; none is pushed after another).
  -- Recorded once, with its command still in the history; a redelivered notice changes nothing.
  local resultField = JOB.stepResultPrefix .. ARGV[1]
  if redis.call('HEXISTS', KEYS[4], resultField) == 1 then return {'recorded', ARGV[1]} end
  local raw = ARGV[2]
  if raw == '' then raw = take_result() end
  if not raw then return {'missing'} end
  local command = redis.call('HGET', KEYS[4], JOB.commandPrefix .. ARGV[1])
  if command then
    job_record_step(KEYS[4], ARGV[1], raw)
    -- A background process was never counted as running (sandbox-exec).
    local ok, c = pcall(cjson.decode, command)
    local background = ok and type(c) == 'table' and c.background == true
    if not background and redis.call('HINCRBY', KEYS[4], JOB.commandsRunning, -1) < 0 then
      redis.call('HSET', KEYS[4], JOB.commandsRunning, 0)
    end
    -- The idle clock starts when the last command ends, not when it was asked for.
    local t = redis.call('TIME')
    redis.call('HSET', KEYS[4], JOB.lastActivityAt, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  return {'recorded', ARGV[1]}
end
if status == 'finished' then
  -- A notice for a step that is none of this job's (the shutdown step its destroy pushes, whose
  -- agent reports it like any other) finalizes nothing: it would release the slot, clear the
  -- deadlines and enqueue the destroy a second time, and pod-lifecycle would run the teardown
  -- again. A redelivered notice of one of its own steps still answers with the outcome, so a
  -- finalize cut short by a crash is completed.
  local n = tonumber(redis.call('HGET', st, 'n')) or 0
  for k = 0, n - 1 do
    if redis.call('HGET', st, 'id:' .. k) == ARGV[1] then return finished_reply() end
  end
  return {'stale', ''}
end
local current = redis.call('HGET', st, 'current')
if current ~= ARGV[1] then return {'stale', current or ''} end
local raw = ARGV[2]
if raw == '' then raw = take_result() end
if not raw then return {'missing'} end
local i = tonumber(redis.call('HGET', st, 'cursor'))
local n = tonumber(redis.call('HGET', st, 'n'))
local ok, r = pcall(cjson.decode, raw)
if not ok or type(r) ~= 'table' or r.stepId ~= ARGV[1] then
  -- Not this step's result (a sandbox writing its key by hand): the step fails, once, for good;
  -- a further notice finds it no longer current.
  r = {schemaVersion = 1, stepId = ARGV[1], exitCode = cjson.null, timedOut = false, durationSeconds = 0,
    errorCode = 'internal', errorMessage = 'the agent wrote a result that is not this step\'s'}
  raw = cjson.encode(r)
end
job_record_step(KEYS[4], ARGV[1], raw)
local function present(v) return v ~= nil and v ~= cjson.null end
local failure = nil
if r.cancelled == true then failure = 'cancelled'
elseif r.timedOut == true then failure = 'timed out'
elseif present(r.errorMessage) then failure = 'failed: ' .. tostring(r.errorMessage)
elseif present(r.exitCode) and r.exitCode ~= 0 then failure = 'exited ' .. tostring(r.exitCode)
end
local function finish(outcome, reason)
  redis.call('HSET', st, 'status', 'finished', 'outcome', outcome, 'reason', reason, 'current', '')
  return {'finished', outcome, reason, 1}
end
local cancel = redis.call('HGET', KEYS[4], JOB.cancelRequested)
if cancel then return finish('cancelled', 'cancelled: ' .. cancel) end
if failure and redis.call('HGET', st, 'coe:' .. i) ~= '1' then
  local outcome = 'failed'
  if r.timedOut == true then outcome = 'timed-out' end
  return finish(outcome, 'step ' .. ARGV[1] .. ' ' .. failure)
end
if i + 1 >= n then
  -- Shown by the CLI as the job's reason: "1 step done", never "all 1 steps done".
  if n == 1 then return finish('succeeded', '1 step done') end
  return finish('succeeded', 'all ' .. n .. ' steps done')
end
local next = i + 1
local nextId = redis.call('HGET', st, 'id:' .. next)
redis.call('HSET', st, 'cursor', next, 'current', nextId)
redis.call('LPUSH', KEYS[2], redis.call('HGET', st, 'step:' .. next))
return {'pushed', next, nextId, redis.call('HGET', st, 'timeout:' .. next)}
