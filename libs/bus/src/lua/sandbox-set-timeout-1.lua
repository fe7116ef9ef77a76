--- @include "job-record"
-- Sets when a ready live sandbox ends (E2B's setTimeout): `ms` after now, by Redis' clock, but
-- never past the operator's cap on its lifetime (`maxEndsAt`, written by the step-dispatcher
-- when it opened the sandbox). The dispatcher moves its lifetime deadline to the new end when
-- told (a `lifetime` request); until then a deadline that comes early finds the later end here.
-- KEYS: job. ARGV: tenant ('' for any: another tenant's sandbox is answered 'missing'), ms.
-- Replies: {'set', endsAt, resumes, capped (0|1)} | {'missing'} | {'closing', state}
--          | {'not-ready', state}
local state = redis.call('HGET', KEYS[1], JOB.state)
if not state then return {'missing'} end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], JOB.tenant) ~= ARGV[1] then return {'missing'} end
if redis.call('HGET', KEYS[1], JOB.kind) ~= 'sandbox' then return {'missing'} end
if redis.call('HEXISTS', KEYS[1], JOB.cancelRequested) == 1 or redis.call('HEXISTS', KEYS[1], JOB.closing) == 1 then
  return {'closing', state}
end
if state ~= 'running' or not redis.call('HGET', KEYS[1], JOB.readyAt) then return {'not-ready', state} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local endsAt = now + tonumber(ARGV[2])
local capped = 0
local cap = tonumber(redis.call('HGET', KEYS[1], JOB.maxEndsAt) or '')
if cap and endsAt > cap then
  endsAt = cap
  capped = 1
end
redis.call('HSET', KEYS[1], JOB.endsAt, endsAt)
redis.call('HINCRBY', KEYS[1], JOB.version, 1)
return {'set', endsAt, tonumber(redis.call('HGET', KEYS[1], JOB.resumes) or '0'), capped}
