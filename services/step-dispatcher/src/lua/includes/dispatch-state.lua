-- The dispatcher's per-job state, KEYS[1] of every dispatch script (layout: dispatch-scripts.ts).
-- `st` is its key, `status` its status (nil before start: the job was never dispatched, or its
-- finished state expired).
local st = KEYS[1]
local status = redis.call('HGET', st, 'status')

-- A job that is over answers with its first outcome (newly = 0): what makes every script idempotent.
local function finished_reply()
  return {'finished', redis.call('HGET', st, 'outcome'), redis.call('HGET', st, 'reason') or '', 0}
end
