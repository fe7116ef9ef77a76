--- @include "job-record"
-- Creates a job record in state queued, unless one exists.
-- KEYS: job hash, job events stream. ARGV: id, tenant, spec, now, eventJson, maxlen, kind, namespace.
-- Returns 1 when created, 0 when the id existed.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], JOB.id, ARGV[1], JOB.tenant, ARGV[2], JOB.state, 'queued', JOB.spec, ARGV[3],
  JOB.createdAt, ARGV[4], JOB.updatedAt, ARGV[4], JOB.version, 1, JOB.namespace, ARGV[8])
-- A live sandbox says so on its record, so scripts need not decode the spec to know.
if ARGV[7] == 'sandbox' then redis.call('HSET', KEYS[1], JOB.kind, 'sandbox', JOB.commandSeq, 0, JOB.commandsRunning, 0) end
job_append_event(KEYS[1], KEYS[2], ARGV[6], ARGV[5])
return 1
