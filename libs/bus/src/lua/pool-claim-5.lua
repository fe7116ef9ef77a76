-- Claims one ready member for a job, atomically: it leaves the ready set and the pool in the same
-- step as it is marked claimed, so no two claims can ever get the same member, and a claimed
-- member never goes back.
-- KEYS: members hash, the ready set (pool + spec version), the pool's set, the unclaimed set,
--       the claims hash.
-- ARGV: jobId, tenant, now (ms).
-- Returns {'hit', memberJSON}, {'empty'}, {'tenant'} (the pool is reserved for other tenants)
-- or {'claimed-before', memberId} (this job already claimed once: a redelivered start).
local before = redis.call('HGET', KEYS[5], ARGV[1])
if before then return {'claimed-before', before} end
while true do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)
  local id = first[1]
  if not id then return {'empty'} end
  local raw = redis.call('HGET', KEYS[1], id)
  local member = raw and cjson.decode(raw)
  if member and member.state == 'ready' then
    -- Every member of one ready set has the same tenants (they are part of the spec version).
    if type(member.tenants) == 'table' then
      local allowed = false
      for _, t in ipairs(member.tenants) do if t == ARGV[2] then allowed = true end end
      if not allowed then return {'tenant'} end
    end
    redis.call('ZREM', KEYS[2], id)
    redis.call('SREM', KEYS[3], id)
    redis.call('SREM', KEYS[4], id)
    member.state = 'claimed'
    member.claimedBy = ARGV[1]
    member.claimedAt = tonumber(ARGV[3])
    member.tenant = ARGV[2]
    local json = cjson.encode(member)
    redis.call('HSET', KEYS[1], id, json)
    redis.call('HSET', KEYS[5], ARGV[1], id)
    return {'hit', json}
  end
  -- A stale entry (its member removed or no longer ready): drop it and look at the next.
  redis.call('ZREM', KEYS[2], id)
end
