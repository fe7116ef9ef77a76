--- @include "lease-take"
-- Takes a slot on behalf of a job that waits for capacity, so that the wake-up that follows is
-- an admission that cannot fail. Only a job still in the waiting set gets one, and it leaves the
-- set in the same step: two wakers never both count one waiter, and a waiter that settled
-- (admitted, cancelled) meanwhile is not given a slot it no longer wants.
-- KEYS: global set, tenant set, waiting set. ARGV: holder, now, expiry, globalLimit, tenantLimit.
-- Returns 1 reserved, 0 global full, -1 tenant full, 2 not waiting (nothing done).
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 2 end
local taken = lease_take(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if taken == 1 then redis.call('ZREM', KEYS[3], ARGV[1]) end
return taken
