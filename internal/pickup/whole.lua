-- index_whole is the one test of a built index, prepended to every script
-- that reads or changes it (index.go). KEYS: geo set, info hash, state
-- hash. The three keys are one index: "built" with a geo set or info hash
-- of another size than "stores" means one was lost, so it is missing.
local function index_whole()
  local state = redis.call('HMGET', KEYS[3], 'built', 'stores')
  local stores = tonumber(state[2])
  return state[1] ~= false and stores ~= nil
    and redis.call('ZCARD', KEYS[1]) == stores and redis.call('HLEN', KEYS[2]) == stores
end
