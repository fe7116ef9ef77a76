import { LuaScript } from '@sandstream/bus';

/**
 * The dispatcher's per-job state machine, kept in `dispatch:{jobId}` (a hash in the job's slot)
 * and changed only by these scripts, so every change is atomic with the LPUSH of the step it
 * implies. Fields: status (running|finished), n, cursor, current (running stepId or ""),
 * id:<i>, step:<i> (wire Step JSON), timeout:<i>, coe:<i> (continueOnError), outcome, reason.
 * Each StepResult is written to the job record (`step:<stepId>`, job-store's layout) in the same
 * script that pushes the next step, and the job record's `cancelRequested` flag (job-store) is
 * read there too: a cancel can never slip between "result recorded" and "next step pushed".
 *
 * Replies are arrays whose first element says what happened:
 *   {'pushed', index, stepId, timeoutSeconds}   a step was LPUSHed now, or had been already
 *   {'finished', outcome, reason, newly}        the job is over (newly = 1 the first time)
 *   {'stale', currentStepId}                    the notice is about a step that is not running
 *   {'missing'}                                 the result is not on the results list (yet)
 *   {'unknown'}                                 no dispatch state: never started or long expired
 */

/** Every script begins here: `st` is the state key, `status` its status (nil before start). */
const readStatus = `local st = KEYS[1]
local status = redis.call('HGET', st, 'status')`;

/** A job that is over answers with its first outcome (newly = 0): what makes every script idempotent. */
const replyIfFinished = `if status == 'finished' then
  return {'finished', redis.call('HGET', st, 'outcome'), redis.call('HGET', st, 'reason') or '', 0}
end`;

/** The beginning of the scripts that act on a started job: no state at all answers 'unknown'. */
const readStartedStatus = `${readStatus}
if not status then return {'unknown'} end
${replyIfFinished}`;

/** KEYS: state, in, job. ARGV: now, then per step: stepId, stepJSON, timeoutSeconds, continueOnError. */
export const startScript = new LuaScript(
  'dispatch-start',
  `${readStatus}
${replyIfFinished}
if status then
  local i = redis.call('HGET', st, 'cursor')
  return {'pushed', tonumber(i), redis.call('HGET', st, 'id:' .. i), redis.call('HGET', st, 'timeout:' .. i)}
end
local n = (#ARGV - 1) / 4
local fields = {'status', 'running', 'n', n, 'cursor', 0, 'startedAt', ARGV[1]}
local cancel = redis.call('HGET', KEYS[3], 'cancelRequested')
if cancel then
  redis.call('HSET', st, 'status', 'finished', 'outcome', 'cancelled', 'reason', 'cancelled: ' .. cancel, 'current', '', 'n', n)
  return {'finished', 'cancelled', 'cancelled: ' .. cancel, 1}
end
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
return {'pushed', 0, ARGV[2], ARGV[4]}`,
);

/**
 * Records the result of the running step and pushes the next one: the only way a step is ever
 * pushed after the first. Idempotent on redelivery: a notice for a step that is no longer the
 * running one changes nothing, so no step is pushed (or run) twice.
 *
 * KEYS: state, in, results, job. ARGV: stepId, resultJSON ("" = take it from the results list).
 */
export const advanceScript = new LuaScript(
  'dispatch-advance',
  `${readStartedStatus}
local current = redis.call('HGET', st, 'current')
if current ~= ARGV[1] then return {'stale', current or ''} end
local raw = ARGV[2]
if raw == '' then
  for _, item in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
    local ok, r = pcall(cjson.decode, item)
    if ok and type(r) == 'table' and r.stepId == ARGV[1] then raw = item; break end
  end
  if raw == '' then return {'missing'} end
  redis.call('LREM', KEYS[3], 1, raw)
end
local i = tonumber(redis.call('HGET', st, 'cursor'))
local n = tonumber(redis.call('HGET', st, 'n'))
local r = cjson.decode(raw)
redis.call('HSET', KEYS[4], 'step:' .. ARGV[1], raw)
redis.call('HINCRBY', KEYS[4], 'version', 1)
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
local cancel = redis.call('HGET', KEYS[4], 'cancelRequested')
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
return {'pushed', next, nextId, redis.call('HGET', st, 'timeout:' .. next)}`,
);

/**
 * Ends a job from outside its steps (job timeout, lost sandbox, cancel backstop) and tells the
 * agent to kill the running step. Idempotent: a finished job keeps its first outcome.
 *
 * KEYS: state, control. ARGV: outcome, reason.
 */
export const finishScript = new LuaScript(
  'dispatch-finish',
  `${readStartedStatus}
local current = redis.call('HGET', st, 'current')
if current and current ~= '' then
  redis.call('LPUSH', KEYS[2], cjson.encode({schemaVersion = 1, kind = 'cancel', stepId = current, reason = ARGV[2]}))
end
redis.call('HSET', st, 'status', 'finished', 'outcome', ARGV[1], 'reason', ARGV[2], 'current', '')
return {'finished', ARGV[1], ARGV[2], 1}`,
);
