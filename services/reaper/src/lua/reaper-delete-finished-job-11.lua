--- @include "job-record"
-- Deletes a finished job's keys only if, at the moment of deletion, the record still says the
-- job finished before the cutoff. Checked and deleted in one script, so a job id that was
-- re-submitted between a reaper's read and its delete is never touched.
-- The log archive guard: while the job's output is not archived (marker `pending`, or no
-- marker when every job must be archived), the keys stay until the hold cutoff, so the reaper
-- never deletes lines the archiver has not read yet; past it they go (an archive down for days
-- must not fill Redis), and the caller reports the loss.
-- KEYS: the job's footprint (libs/bus job-footprint.ts, all in the job's slot): job hash,
-- log-archive marker, then the rest (dispatch state, the code-contexts hash, the sandbox's named
-- keys, its preview hash).
-- ARGV: cutoff (ms), hold cutoff (ms), '1' when every job must be archived first, the reaper's
-- namespace (a record of another namespace is never deleted; one without the field, written
-- before it existed, was checked by the caller against the namespace's index).
-- Returns { tenant, archive marker or '' } of the deleted job, 'held' when the guard kept it,
-- or false.
local namespace = redis.call('HGET', KEYS[1], JOB.namespace)
if namespace and namespace ~= ARGV[4] then return false end
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state or not TERMINAL[state] then return false end
local finished = tonumber(redis.call('HGET', KEYS[1], JOB.finishedAt) or '0')
if finished > tonumber(ARGV[1]) then return false end
local archive = redis.call('GET', KEYS[2]) or ''
if archive ~= 'done' and (archive == 'pending' or ARGV[3] == '1') and finished > tonumber(ARGV[2]) then
  return 'held'
end
local tenant = redis.call('HGET', KEYS[1], JOB.tenant)
redis.call('UNLINK', unpack(KEYS))
return { tenant or '', archive }
