--- @include "job-record"
-- A client call on a live sandbox (keepAlive, a reconnect): pushes its idle expiry out, by Redis'
-- clock (the one the idle check compares with). Only a ready sandbox that is not closing.
-- KEYS: job. Replies 1 when touched, 0 otherwise.
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return 0 end
if redis.call('HGET', KEYS[1], JOB.state) ~= 'running' then return 0 end
if redis.call('HEXISTS', KEYS[1], JOB.closing) == 1 then return 0 end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], JOB.lastActivityAt, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
