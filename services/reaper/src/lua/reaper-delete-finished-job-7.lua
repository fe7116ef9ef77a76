--- @include "job-record"
-- Deletes a finished job's keys only if, at the moment of deletion, the record still says the
-- job finished before the cutoff. Checked and deleted in one script, so a job id that was
-- re-submitted between a reaper's read and its delete is never touched.
-- KEYS: job hash, then the job's other keys (same slot: in, events, results, heartbeat,
-- control, dispatch state). ARGV: cutoff (ms).
-- Returns the tenant of the deleted job, or false.
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state or not TERMINAL[state] then return false end
local finished = tonumber(redis.call('HGET', KEYS[1], JOB.finishedAt) or '0')
if finished > tonumber(ARGV[1]) then return false end
local tenant = redis.call('HGET', KEYS[1], JOB.tenant)
redis.call('UNLINK', unpack(KEYS))
return tenant or ''
