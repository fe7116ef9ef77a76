--- @include "job-layout"

-- Helpers over the job record hash (layout: libs/bus/src/job-layout.ts) for every script that
-- touches a record: the job-store's own, the dispatcher's and the reaper's.

-- Appends a JobEvent's JSON to the job's own events stream, capped like every events stream,
-- and keeps the same JSON on the record under the entry's id. The stream is the sandbox's to
-- write too (its agent's output goes there), so a follower trusts a `job` entry only by that
-- copy, which no sandbox can write (docs/wire.md, "Who may say what").
local function job_append_event(jobKey, eventsKey, maxlen, json)
  local id = redis.call('XADD', eventsKey, 'MAXLEN', '~', maxlen, '*', JOB.eventField, json)
  redis.call('HSET', jobKey, JOB.eventPrefix .. id, json)
end

-- A JobEvent (JSON) about this record; id and tenant are read from it.
local function job_event(jobKey, kind, from, to, at, reason)
  local event = {type = kind, jobId = redis.call('HGET', jobKey, JOB.id),
    tenant = redis.call('HGET', jobKey, JOB.tenant), from = from, to = to, at = at}
  if reason and reason ~= '' then event.reason = reason end
  return cjson.encode(event)
end

-- Moves the record to `to` (the caller checked that it may) and appends the transition event.
-- Returns the event's JSON for the cross-slot writes the caller does afterwards.
local function job_set_state(jobKey, eventsKey, from, to, now, reason, maxlen)
  redis.call('HSET', jobKey, JOB.state, to, JOB.updatedAt, now)
  if reason ~= '' then redis.call('HSET', jobKey, JOB.reason, reason) else redis.call('HDEL', jobKey, JOB.reason) end
  if TERMINAL[to] then redis.call('HSET', jobKey, JOB.finishedAt, now) end
  redis.call('HINCRBY', jobKey, JOB.version, 1)
  local json = job_event(jobKey, 'transition', from, to, tonumber(now), reason)
  job_append_event(jobKey, eventsKey, maxlen, json)
  return json
end

-- Records one step's StepResult JSON on the record.
local function job_record_step(jobKey, stepId, raw)
  redis.call('HSET', jobKey, JOB.stepResultPrefix .. stepId, raw)
  redis.call('HINCRBY', jobKey, JOB.version, 1)
end

-- A live sandbox's commands in its history with no recorded result: each as {id, field}, field
-- being the record's field that holds the command's JSON. Such a command is still running, or
-- ended with its result not yet recorded by a dispatcher (its agent SET the result key then).
local function job_unrecorded_commands(jobKey)
  local fields = redis.call('HKEYS', jobKey)
  local recorded = {}
  for _, f in ipairs(fields) do
    if string.sub(f, 1, #JOB.stepResultPrefix) == JOB.stepResultPrefix then
      recorded[string.sub(f, #JOB.stepResultPrefix + 1)] = true
    end
  end
  local open = {}
  for _, f in ipairs(fields) do
    if string.sub(f, 1, #JOB.commandPrefix) == JOB.commandPrefix then
      local cid = string.sub(f, #JOB.commandPrefix + 1)
      if not recorded[cid] then table.insert(open, {id = cid, field = f}) end
    end
  end
  return open
end
