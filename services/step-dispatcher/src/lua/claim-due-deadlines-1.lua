-- Takes the due members and pushes their score a lease into the future in one step, so two
-- sweepers never handle the same deadline at once, and a sweeper that dies mid-handling only
-- delays it by the lease: the member becomes due again and another instance handles it.
-- KEYS: deadlines set. ARGV: now, lease expiry, batch size.
-- Returns { claimed members, the earliest score left (after the claim) or false when the set is
-- empty }: the sweeper sleeps until then instead of polling an idle set.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], member) end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return { due, first[2] or false }
