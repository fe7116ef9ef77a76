--- @include "job-record"
-- Compare-and-set of the state. KEYS: job hash, job events stream.
-- ARGV: to, now, reason, maxlen, nFrom, from..., then field/value pairs to set.
-- Returns {'missing'} | {'noop', state} | {'conflict', state} | {'forbidden', state}
--   | {'ok', from, eventJson}. 'forbidden': the caller expected this state, but the state table
--   (JOB_TRANSITIONS) does not allow the move: a bug in the caller, never a race.
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
local to = ARGV[1]
if state == to then return {'noop', state} end
local nFrom = tonumber(ARGV[5])
local expected = false
for i = 6, 5 + nFrom do if ARGV[i] == state then expected = true end end
if not expected then return {'conflict', state} end
local next = ALLOWED[state]
if not next or not next[to] then return {'forbidden', state} end
for i = 6 + nFrom, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return {'ok', state, job_set_state(KEYS[1], KEYS[2], state, to, ARGV[2], ARGV[3], ARGV[4])}
