--- @include "job-record"
-- Sets one field of an existing record (never creates a record).
-- KEYS: job hash. ARGV: field, value. Returns 1 when set, 0 when the record does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], JOB.version, 1)
return 1
