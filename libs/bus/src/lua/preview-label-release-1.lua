-- Frees a host-form preview label's index entry, unless it names another sandbox (a label is 12
-- hex characters of a hash: two sandboxes may share one, and the later one's entry stays).
-- preview-ports.ts.
-- KEYS: the label's entry. ARGV: the sandbox id being freed. Returns 1 when freed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('UNLINK', KEYS[1])
return 1
