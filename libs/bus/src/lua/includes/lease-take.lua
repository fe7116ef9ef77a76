-- Takes a global and a tenant slot for `holder` at once (the caller passes both sets' keys).
-- Expired holders are dropped first, so a dead holder's slot comes back by itself.
-- Returns 1 granted (or renewed: taking twice is idempotent), 0 global full, -1 tenant full.
local function lease_take(globalKey, tenantKey, holder, now, expiry, globalLimit, tenantLimit)
  redis.call('ZREMRANGEBYSCORE', globalKey, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', tenantKey, '-inf', now)
  if redis.call('ZSCORE', globalKey, holder) then
    redis.call('ZADD', globalKey, expiry, holder)
    redis.call('ZADD', tenantKey, expiry, holder)
    return 1
  end
  if redis.call('ZCARD', globalKey) >= tonumber(globalLimit) then return 0 end
  if redis.call('ZCARD', tenantKey) >= tonumber(tenantLimit) then return -1 end
  redis.call('ZADD', globalKey, expiry, holder)
  redis.call('ZADD', tenantKey, expiry, holder)
  return 1
end
