-- Takes every hold a sandbox asks for, or none: one writer per volume, readers share.
-- KEYS: the tenant's volumes hash, the holds hash, the held-by hash.
-- ARGV: jobId, tenant, now (ms), JSON [[name, readOnly], ...].
-- Returns {'ok'}, {'missing', name}, or {'held', name, holder jobId, holder readOnly ('1'/'0'), since}.
-- Re-entrant: a job already holding a volume (a retried submit) takes it again.
local wants = cjson.decode(ARGV[4])
for _, want in ipairs(wants) do
  local name, ro = want[1], want[2]
  if not redis.call('HGET', KEYS[1], name) then return {'missing', name} end
  local raw = redis.call('HGET', KEYS[2], ARGV[2] .. '/' .. name)
  if raw then
    for holder, h in pairs(cjson.decode(raw)) do
      -- A writer excludes another writer; readers share with each other and with the writer.
      if holder ~= ARGV[1] and (not ro) and (not h.ro) then
        return {'held', name, holder, '0', tostring(h.at)}
      end
    end
  end
end
-- What the job already holds stays listed (a retried submit adds nothing twice).
local listed = redis.call('HGET', KEYS[3], ARGV[1])
local held = listed and cjson.decode(listed) or {}
local known = {}
for _, field in ipairs(held) do known[field] = true end
for _, want in ipairs(wants) do
  local field = ARGV[2] .. '/' .. want[1]
  local raw = redis.call('HGET', KEYS[2], field)
  local holders = raw and cjson.decode(raw) or {}
  holders[ARGV[1]] = { ro = want[2], at = tonumber(ARGV[3]) }
  redis.call('HSET', KEYS[2], field, cjson.encode(holders))
  if not known[field] then held[#held + 1] = field end
end
if #held > 0 then redis.call('HSET', KEYS[3], ARGV[1], cjson.encode(held)) end
return {'ok'}
