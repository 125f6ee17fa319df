-- A read-only snapshot, in one atomic step, of everything the audit
-- compares with PostgreSQL: each SKU's live round and its buyer counts, and the order stream's state (last id, the group's delivered
-- point, its pending entries with their content or their absence, and the
-- entries not yet delivered). Taken at one instant, so a sale going on
-- cannot make the two sides disagree by timing.
--
-- Whose keys: KEYS[1] is the order package's stream (handed in by
-- order.AuditKeys); KEYS[2 + 2(i-1)] and KEYS[3 + 2(i-1)] are inventory's
-- sale state and buyer counts of SKU i (Stock.SaleKey, BuyersKey).
-- ARGV[1] the writers' group, ARGV[2] the most entries to return.
-- Returns JSON: {last, delivered, pending: [[id, fields|false]...],
-- undelivered: [[id, fields]...], truncated, rounds: [[fields, buyers]...]}
local out = {rounds = {}, pending = {}, undelivered = {}, truncated = false}
local max = tonumber(ARGV[2])
for i = 2, #KEYS, 2 do
  out.rounds[#out.rounds + 1] = {redis.call('HGETALL', KEYS[i]), redis.call('HGETALL', KEYS[i + 1])}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  out.last, out.delivered = '0-0', '0-0'
  return cjson.encode(out)
end
-- The last id ever added, even when trimming left the stream empty.
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for j = 1, #info, 2 do
  if info[j] == 'last-generated-id' then out.last = info[j + 1] end
end
out.delivered = '0-0'
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
if ok then
  for _, g in ipairs(groups) do
    local info = {}
    for j = 1, #g, 2 do info[g[j]] = g[j + 1] end
    if info['name'] == ARGV[1] then out.delivered = info['last-delivered-id'] end
  end
  local pend = {}
  if out.delivered ~= '0-0' then
    pend = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', max)
  end
  for _, p in ipairs(pend) do
    local e = redis.call('XRANGE', KEYS[1], p[1], p[1])
    out.pending[#out.pending + 1] = {p[1], e[1] and e[1][2] or false}
  end
  if #pend >= max then out.truncated = true end
end
local after = '(' .. out.delivered
if out.delivered == '0-0' then after = '-' end
local rest = redis.call('XRANGE', KEYS[1], after, '+', 'COUNT', max)
for _, e in ipairs(rest) do out.undelivered[#out.undelivered + 1] = {e[1], e[2]} end
if #rest >= max then out.truncated = true end
return cjson.encode(out)
