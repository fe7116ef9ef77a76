-- KEYS: global set, freed list. ARGV: now. Drops expired global holders and pushes one wake-up
-- per freed slot (the capacity waker fills every free slot on each). Tenant sets are cleaned
-- lazily by lease-acquire (their keys are not enumerable here).
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
for _, holder in ipairs(expired) do
  redis.call('ZREM', KEYS[1], holder)
  redis.call('LPUSH', KEYS[2], holder)
end
redis.call('LTRIM', KEYS[2], 0, 999)
return expired
