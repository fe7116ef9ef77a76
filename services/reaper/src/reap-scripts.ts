import { LuaScript } from '@sandstream/bus';

/**
 * Deletes a finished job's keys only if, at the moment of deletion, the record still says the
 * job finished before the cutoff. Checked and deleted in one script, so a job id that was
 * re-submitted between a reaper's read and its delete is never touched.
 * KEYS: job hash, then every other key of the job (same slot). ARGV: cutoff (ms).
 * Returns the tenant of the deleted job, or false.
 */
export const DELETE_FINISHED_JOB = new LuaScript(
  'reaper-delete-finished-job',
  `
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'succeeded' and state ~= 'failed' and state ~= 'cancelled' and state ~= 'timed-out' then return false end
local finished = tonumber(redis.call('HGET', KEYS[1], 'finishedAt') or '0')
if finished > tonumber(ARGV[1]) then return false end
local tenant = redis.call('HGET', KEYS[1], 'tenant')
redis.call('UNLINK', unpack(KEYS))
return tenant or ''
`,
);

/**
 * Deletes a per-job key that belongs to no job: no record, no live heartbeat, and untouched for
 * at least the grace period (a producer that writes steps before creating a record, or an agent
 * run by hand, keeps its keys busy). KEYS: the key, job hash, heartbeat. ARGV: grace (s).
 * Returns 1 when deleted.
 */
export const DELETE_ORPHAN_KEY = new LuaScript(
  'reaper-delete-orphan-key',
  `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local ok, idle = pcall(redis.call, 'OBJECT', 'IDLETIME', KEYS[1])
if not ok or not idle then return 0 end
if idle < tonumber(ARGV[1]) then return 0 end
redis.call('UNLINK', KEYS[1])
return 1
`,
);
