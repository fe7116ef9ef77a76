-- KEYS: global set, tenant set, freed list, waiting set. ARGV: holder.
-- Returns 1 when a slot was actually freed (then one wake-up is pushed for waiting schedulers).
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if removed == 1 then
  redis.call('LPUSH', KEYS[3], ARGV[1])
  redis.call('LTRIM', KEYS[3], 0, 999)
end
return removed
