-- wrk script for `make bench`: purchases of one product by the shoppers
-- `scripts/bench.sh` registered, a second client beside `shop loadtest`.
-- WRK_SHOPPERS names a file of "access-token x-forwarded-for" lines, one
-- per shopper; WRK_SKU the product. Each request is the next shopper's
-- POST /api/v1/products/{sku}/purchase of one unit with a fresh
-- Idempotency-Key (WRK_RUN, the thread and a counter), as the load test's
-- are. Answers are counted by status; done() prints one line per status,
-- "status <code> <count>", which bench.sh checks against the stock.
local shoppers = {}
local path
local run = os.getenv("WRK_RUN") or "0"
id = 0 -- set per thread by setup()
local n = 0
local body = '{"quantity":1}'
statuses = {}

local threads = {}
function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  local f = assert(io.open(os.getenv("WRK_SHOPPERS"), "r"))
  for line in f:lines() do
    local token, addr = line:match("^(%S+)%s+(%S+)$")
    if token then
      table.insert(shoppers, {auth = "Bearer " .. token, addr = addr})
    end
  end
  f:close()
  assert(#shoppers > 0, "WRK_SHOPPERS has no shoppers")
  path = "/api/v1/products/" .. assert(os.getenv("WRK_SKU"), "WRK_SKU is unset") .. "/purchase"
end

function request()
  n = n + 1
  local s = shoppers[(n - 1) % #shoppers + 1]
  return wrk.format("POST", path, {
    ["Authorization"] = s.auth,
    ["X-Forwarded-For"] = s.addr,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = string.format("wrk-%s-%d-%d", run, id, n),
  }, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for code, count in pairs(t:get("statuses")) do
      total[code] = (total[code] or 0) + count
    end
  end
  for code, count in pairs(total) do
    io.write(string.format("status %d %d\n", code, count))
  end
end
