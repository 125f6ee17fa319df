-- wrk script for `make bench`: purchases of one product by the shoppers
-- `shop bench` registered, a second client beside `shop loadtest`.
-- WRK_SHOPPERS names a file of "access-token x-forwarded-for" lines, one
-- per shopper; WRK_SKU the product. Each request is the next shopper's
-- POST /api/v1/products/{sku}/purchase of one unit with a fresh
-- Idempotency-Key (WRK_RUN, the thread and a counter), as the load test's
-- are. Answers are counted by status; done() prints one line per status,
-- "status <code> <count>", which `shop bench` checks against the stock.
--
-- WRK_RATE=R paces the requests to R a second in all (one thread): each
-- request has its slot on a fixed timeline, 1/R apart, and waits for it
-- (delay()), so a slow answer does not slow the schedule; a request whose
-- slot has passed (every connection was busy) goes at once, as an open
-- model's would. wrk times each request from its write, so the figures
-- are the server's answers, not the slots' lateness: done() prints
-- "late <requests> <longest ms>", the requests whose connection came free
-- over 1 ms after their slot (every connection was busy), so that a run
-- where lateness hid part of the tail shows it. (The timer's own slip of
-- under a millisecond is not counted; after a socket error wrk sends one
-- request on the new connection off the timeline.)
local shoppers = {}
local path
local run = os.getenv("WRK_RUN") or "0"
id = 0 -- set per thread by setup()
local n = 0
local body = '{"quantity":1}'
statuses = {}
late, late_max = 0, 0 -- paced requests over 1 ms behind their slot

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

local rate = tonumber(os.getenv("WRK_RATE") or "")
if rate and rate > 0 then
  -- wrk's Lua is LuaJIT: the monotonic clock through its FFI, in ms.
  local ffi = require("ffi")
  ffi.cdef [[
    typedef struct { long tv_sec; long tv_nsec; } shop_wrk_timespec;
    int clock_gettime(int clock, shop_wrk_timespec *ts);
  ]]
  local ts = ffi.new("shop_wrk_timespec")
  local CLOCK_MONOTONIC = 1
  local function now_ms()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local interval = 1000 / rate
  local slot
  -- Defined only when pacing: wrk takes a script with delay() as paced.
  function delay()
    local t = now_ms()
    slot = (slot or t) + interval
    local wait = slot - interval - t
    if wait < -1 then
      late = late + 1
      if -wait > late_max then late_max = -wait end
    end
    if wait <= 0 then return 0 end
    return math.floor(wait + 0.5)
  end
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
  if rate and rate > 0 then
    local n, longest = 0, 0
    for _, t in ipairs(threads) do
      n = n + t:get("late")
      longest = math.max(longest, t:get("late_max"))
    end
    io.write(string.format("late %d %.1f\n", n, longest))
  end
end
