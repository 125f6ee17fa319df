-- Read a key's entry and the generations of the key and of its tags in
-- one atomic step: the snapshot fill.go's read takes in one pipeline, for
-- a caller that runs it inside a script call of its own (Prefetch).
-- KEYS: entry, key generation, tag generation x n
-- Returns {entry, key generation, tag generation x n}, false for each
-- key that does not exist.
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('GET', KEYS[i])
end
return out
