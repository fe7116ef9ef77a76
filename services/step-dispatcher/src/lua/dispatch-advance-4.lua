--- @include "dispatch-state"
--- @include "job-record"
-- Records the result of the running step and pushes the next one: the only way a step is ever
-- pushed after the first. Idempotent on redelivery: a notice for a step that is no longer the
-- running one changes nothing, so no step is pushed (or run) twice.
-- KEYS: state, in, results, job. ARGV: stepId, resultJSON ("" = take it from the results list).

-- The results list is the sandbox's own to write: its agent LPUSHes, so the newest results are
-- at the head, and an honest agent has far fewer waiting than RESULTS_SCAN (64 pending commands
-- and 16 background processes at most). A sandbox that floods the list must not make this script,
-- which blocks Redis for every tenant, read or decode all of it: only the head is looked at, only
-- entries that contain the step id and are no larger than a result can be are decoded, and the
-- list is cut to RESULTS_KEEP entries (the oldest, a flood's, go).
-- Entries that name the step but turn out to be another's are decoded up to DECODE_WASTE of them
-- or DECODE_WASTE_BYTES in all (each forged notice decoded all 256 before: test/bench/
-- redis-flood.bench.ts); past that the result counts as missing, which hurts only the sandbox
-- that buried its own result (an honest entry names another step's id, in quotes, only when its
-- content holds that id). An id that JSON writes as it is (no quote, backslash or control
-- character: the dispatcher's `cmd-<n>` and the usual step ids) is looked for in quotes, so `cmd-1`
-- does not make `cmd-12`'s result a candidate. Not bounded yet: the bytes the LRANGE copies (256
-- entries of up to RESULT_MAX_BYTES each); the fix is to read only the expected result.
local RESULTS_SCAN = 256
local RESULTS_KEEP = 1024
local RESULT_MAX_BYTES = 17 * 1024 * 1024
local DECODE_WASTE = 16
local DECODE_WASTE_BYTES = 64 * 1024

-- Takes the named step's result off the results list (the agent's); nil when it is not there yet.
local function take_result()
  redis.call('LTRIM', KEYS[3], 0, RESULTS_KEEP - 1)
  local needle = ARGV[1]
  if not string.find(needle, '[%c"\\]') then needle = '"' .. needle .. '"' end
  local wasted, wastedBytes = 0, 0
  for _, item in ipairs(redis.call('LRANGE', KEYS[3], 0, RESULTS_SCAN - 1)) do
    if #item <= RESULT_MAX_BYTES and string.find(item, needle, 1, true) then
      local ok, r = pcall(cjson.decode, item)
      if ok and type(r) == 'table' and r.stepId == ARGV[1] then
        redis.call('LREM', KEYS[3], 1, item)
        return item
      end
      wasted, wastedBytes = wasted + 1, wastedBytes + #item
      if wasted >= DECODE_WASTE or wastedBytes >= DECODE_WASTE_BYTES then return nil end
    end
  end
  return nil
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
if status == 'finished' then return finished_reply() end
local current = redis.call('HGET', st, 'current')
if current ~= ARGV[1] then return {'stale', current or ''} end
local raw = ARGV[2]
if raw == '' then raw = take_result() end
if not raw then return {'missing'} end
local i = tonumber(redis.call('HGET', st, 'cursor'))
local n = tonumber(redis.call('HGET', st, 'n'))
local r = cjson.decode(raw)
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
