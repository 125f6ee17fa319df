-- wrk script for `make bench`: each request carries one of WRK_ADDRESSES
-- X-Forwarded-For addresses (default 200), round-robin, the same
-- 198.18.0.0/15 addresses as `shop loadtest get --addresses`, so a server
-- that trusts loopback as a proxy limits each on its own. The requests are
-- formatted once per thread, not once per request.
local n = tonumber(os.getenv("WRK_ADDRESSES") or "200")
local reqs = {}
local k = 0

init = function(args)
  for i = 1, n do
    local addr = string.format("198.18.%d.%d", math.floor(i / 256), i % 256)
    reqs[i] = wrk.format("GET", nil, { ["X-Forwarded-For"] = addr })
  end
end

request = function()
  k = k % n + 1
  return reqs[k]
end
