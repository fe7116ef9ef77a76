--- @include "lease-take"
-- Takes a global and a tenant slot at once.
-- KEYS: global set, tenant set. ARGV: holder, now, expiry, globalLimit, tenantLimit.
-- Returns 1 granted (or renewed: acquiring twice is idempotent), 0 global full, -1 tenant full.
return lease_take(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
