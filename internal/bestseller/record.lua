-- Counts (ARGV[1] = "count") or takes back (ARGV[1] = "takeback") a batch
-- of orders on the best-seller boards, each order at most once.
--
-- KEYS[1]   the generation counter (bumped when a board changes)
-- KEYS[2..] the mark hashes and boards the orders name, by index
-- ARGV[2]   number of days; then per day (the orders of one UTC day
--           share their marks and boards, so they are sent once a day):
--           mark hash index, mark expiry (unix s), number of boards,
--           then per board: board index, expiry (0: none)
-- then      number of orders; then per order:
--           order id, its day (1-based), number of lines,
--           then per line: sku, units
--
-- Scores are -units (see the package doc). Marks: absent, "c" counted,
-- "x" taken back. A count moves the boards only from absent; a take-back
-- only from "c", and leaves "x" in any case so that a later count of an
-- order cancelled first does nothing. A take-back never recreates an
-- expired board. Every argument is read and checked before the first
-- write.
local mode = ARGV[1]
if mode ~= 'count' and mode ~= 'takeback' then
  return redis.error_reply('ERR bad mode')
end
local pos = 2
local function num()
  local v = tonumber(ARGV[pos])
  if not v then error('bad number at argument ' .. pos) end
  pos = pos + 1
  return v
end
local function str()
  local v = ARGV[pos]
  if not v or v == '' then error('bad string at argument ' .. pos) end
  pos = pos + 1
  return v
end
local function key(i)
  local k = KEYS[i]
  if not k or i < 2 then error('bad key index ' .. i) end
  return k
end

local days = {}
for d = 1, num() do
  local day = {marks = key(num()), markExp = num(), boards = {}}
  for b = 1, num() do
    day.boards[b] = {key = key(num()), exp = num()}
  end
  days[d] = day
end
local orders = {}
for o = 1, num() do
  local id = str()
  local day = days[num()] or error('bad day at argument ' .. (pos - 1))
  local ord = {id = id, marks = day.marks, markExp = day.markExp, boards = day.boards, lines = {}}
  for l = 1, num() do
    local sku, units = str(), num()
    if units <= 0 then error('bad units') end
    ord.lines[l] = {sku = sku, units = units}
  end
  orders[o] = ord
end

-- The boards' moves are summed over the batch, then applied once per
-- board and SKU: a flash sale's batch of a thousand orders of one SKU is
-- four ZINCRBYs, not four thousand. A batch is all counts or all
-- take-backs, so whether a board exists is read once, before any move.
local delta, touched, expireAt, exists = {}, {}, {}, {}
local function move(ord, sign)
  for _, b in ipairs(ord.boards) do
    if exists[b.key] == nil then exists[b.key] = redis.call('EXISTS', b.key) == 1 end
    if sign < 0 or exists[b.key] then
      local d = delta[b.key]
      if not d then
        d = {}
        delta[b.key] = d
        touched[#touched + 1] = b.key
      end
      for _, l in ipairs(ord.lines) do d[l.sku] = (d[l.sku] or 0) + sign * l.units end
      if sign < 0 and b.exp > 0 then expireAt[b.key] = math.max(expireAt[b.key] or 0, b.exp) end
    end
  end
end

local function applyMoves()
  for _, k in ipairs(touched) do
    for sku, units in pairs(delta[k]) do
      if units ~= 0 then
        local score = tonumber(redis.call('ZINCRBY', k, units, sku))
        if score >= 0 then redis.call('ZREM', k, sku) end
      end
    end
    if expireAt[k] then redis.call('EXPIREAT', k, expireAt[k]) end
  end
end

-- A count is one HSETNX an order. The marks' expiry is raised once a
-- marks hash, to the latest its orders ask for: per order it was half
-- the script's time, and the script holds Redis for every purchase.
local applied, skipped, markExp = 0, 0, {}
for _, ord in ipairs(orders) do
  if mode == 'count' then
    if redis.call('HSETNX', ord.marks, ord.id, 'c') == 1 then
      move(ord, -1)
      applied = applied + 1
    else
      skipped = skipped + 1
    end
  else
    local mark = redis.call('HGET', ord.marks, ord.id)
    if mark ~= 'x' then redis.call('HSET', ord.marks, ord.id, 'x') end
    if mark == 'c' then
      move(ord, 1)
      applied = applied + 1
    else
      skipped = skipped + 1
    end
  end
  markExp[ord.marks] = math.max(markExp[ord.marks] or 0, ord.markExp)
end
for marks, exp in pairs(markExp) do
  if redis.call('EXPIRETIME', marks) < exp then redis.call('EXPIREAT', marks, exp) end
end
applyMoves()
if applied > 0 then redis.call('INCR', KEYS[1]) end
return {applied, skipped}
