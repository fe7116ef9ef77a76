-- One slice of a BullMQ queue state, counted by tenant: its members are named `j_<internal job
-- id>` (bullJobId), and an internal id starts `t.<tag>.` for a tenant other than default
-- (libs/bus tenant-ids.ts). A slice at a time, so Redis is never busy for long with one call.
-- KEYS: the state's list (wait, paused, active) or sorted set (delayed, prioritized, completed,
-- failed). ARGV: `list` or `zset`, the slice's first and last index.
-- Replies {members read, tag 1, count 1, tag 2, count 2, …}; tag '' is tenant default (plain ids).
local members
if ARGV[1] == 'list' then
  members = redis.call('LRANGE', KEYS[1], ARGV[2], ARGV[3])
else
  members = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3])
end
local counts = {}
local order = {}
for _, member in ipairs(members) do
  local tag = ''
  if string.sub(member, 1, 4) == 'j_t.' and string.sub(member, 21, 21) == '.' then
    local candidate = string.sub(member, 5, 20)
    if string.find(candidate, '^[a-z2-7]+$') then tag = candidate end
  end
  if counts[tag] == nil then
    counts[tag] = 0
    order[#order + 1] = tag
  end
  counts[tag] = counts[tag] + 1
end
local reply = { #members }
for _, tag in ipairs(order) do
  reply[#reply + 1] = tag
  reply[#reply + 1] = counts[tag]
end
return reply
