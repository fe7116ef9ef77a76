-- One tenant's share of a BullMQ queue's figures: its members are named `j_<internal job id>`
-- (bullJobId), and a tenant's internal ids start with its prefix (libs/bus tenant-ids.ts).
-- KEYS: the queue's wait, paused, active (lists), delayed, prioritized, completed, failed (zsets).
-- ARGV: the tenant's member prefix (`j_t.<tag>.`), or '' for tenant default (plain ids: every
-- member without a tenant prefix).
-- Replies {waiting (wait + paused), active, delayed, prioritized, completed, failed}.
local prefix = ARGV[1]
local function mine(member)
  if prefix ~= '' then return string.sub(member, 1, #prefix) == prefix end
  return not (string.sub(member, 1, 4) == 'j_t.' and string.sub(member, 21, 21) == '.'
    and string.find(string.sub(member, 5, 20), '^[a-z2-7]+$') ~= nil)
end
local function count(members)
  local n = 0
  for _, member in ipairs(members) do
    if mine(member) then n = n + 1 end
  end
  return n
end
local waiting = count(redis.call('LRANGE', KEYS[1], 0, -1)) + count(redis.call('LRANGE', KEYS[2], 0, -1))
local active = count(redis.call('LRANGE', KEYS[3], 0, -1))
local replies = { waiting, active }
for i = 4, 7 do replies[#replies + 1] = count(redis.call('ZRANGE', KEYS[i], 0, -1)) end
return replies
