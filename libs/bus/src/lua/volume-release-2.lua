-- Gives back every hold of a sandbox (its teardown, or a stale hold of a sandbox that is gone).
-- KEYS: the holds hash, the held-by hash. ARGV: jobId.
-- Returns how many holds went. Idempotent.
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return 0 end
local n = 0
for _, field in ipairs(cjson.decode(raw)) do
  local hraw = redis.call('HGET', KEYS[1], field)
  if hraw then
    local holders = cjson.decode(hraw)
    if holders[ARGV[1]] then n = n + 1 end
    holders[ARGV[1]] = nil
    if next(holders) == nil then
      redis.call('HDEL', KEYS[1], field)
    else
      redis.call('HSET', KEYS[1], field, cjson.encode(holders))
    end
  end
end
redis.call('HDEL', KEYS[2], ARGV[1])
return n
