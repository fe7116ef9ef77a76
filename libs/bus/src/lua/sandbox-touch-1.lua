--- @include "job-record"
-- A client call on a live sandbox (keepAlive, a read of its state by its driver): pushes its idle
-- expiry out. Only a ready sandbox is touched.
-- KEYS: job. ARGV: now. Replies 1 when touched, 0 otherwise.
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return 0 end
if redis.call('HGET', KEYS[1], JOB.state) ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], JOB.lastActivityAt, ARGV[1])
return 1
