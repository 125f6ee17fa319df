-- Trim the order stream below the oldest entry that is not yet written:
-- the oldest pending entry of any group, or else the first entry no group
-- has been delivered. Entries below that are acked, hence in PostgreSQL.
-- Reading the groups and trimming in one script means no entry can be
-- delivered between the look and the cut.
--
-- KEYS[1] the stream. Returns the number of entries removed.
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return 0 end

local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parts(a)
  local bm, bs = parts(b)
  return am < bm or (am == bm and as < bs)
end

local minid = nil
for _, g in ipairs(groups) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  local ms, seq = parts(info['last-delivered-id'])
  local bound = string.format('%d-%d', ms, seq + 1)
  local pend = redis.call('XPENDING', KEYS[1], info['name'])
  if pend[1] > 0 and less(pend[2], bound) then bound = pend[2] end
  if minid == nil or less(bound, minid) then minid = bound end
end
return redis.call('XTRIM', KEYS[1], 'MINID', minid)
