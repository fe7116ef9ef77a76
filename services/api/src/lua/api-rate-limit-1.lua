-- A batch of requests against a key's fixed one-minute window, shared by every API replica.
-- KEYS: the bucket's counter. ARGV: the window in ms, the number of requests in the batch.
-- Replies {count in this window after the batch, ms left}.
local n = tonumber(ARGV[2])
local count = redis.call('INCRBY', KEYS[1], n)
if count == n then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  -- A counter left without an expiry (written by hand, or an expiry lost) must not block forever.
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return { count, left }
