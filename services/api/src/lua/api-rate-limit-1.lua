-- One request against a key's fixed one-minute window, shared by every API replica.
-- KEYS: the bucket's counter. ARGV: the window in ms. Replies {count in this window, ms left}.
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  -- A counter left without an expiry (written by hand, or an expiry lost) must not block forever.
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return { count, left }
