-- A read-only snapshot, in one atomic step, of everything the audit
-- compares with PostgreSQL for a group of order partitions: each SKU's
-- live round and its buyer counts, and each partition's order stream
-- (last id, the group's delivered point, its pending entries with their
-- content or their absence, and the entries not yet delivered). Taken at
-- one instant, so a sale going on cannot make the two sides disagree by
-- timing. On a cluster a group is one partition: its stream and its SKUs
-- share the partition's slot.
--
-- Whose keys: KEYS[1..n] are the order package's streams of the group's
-- partitions (order.PartitionKeys), n = ARGV[3]; then pairs of
-- inventory's sale state and buyer counts (Stock.BucketKey,
-- BucketBuyersKey): one per SKU, or one per stock bucket of a bucketed
-- round on a single Redis, which the Go side sums; on a cluster, one per
-- stock bucket whose slot is the partition's.
-- ARGV[1] the writers' group, ARGV[2] the most entries to return per
-- stream (pending and undelivered each), ARGV[3] n.
-- On a cluster (ARGV[4] = k, the group's pair count, given) it also reads
-- what accounts for the lines held here for orders homed elsewhere: then
-- the SKU pairs are followed by the partition's holds index, settled log
-- and releases log (order package), and ARGV[5] is the prefix that names
-- a hold record with its order id (the records share the index's slot).
-- That part is bounded too: at most ARGV[2] holds, of the settled log only
-- the entries scored now or later (the drops of this very ms), and of the
-- releases log its last id. The settled log's older entries and the SKUs'
-- released sets are read after this step, against the fences returned
-- here (now, and the releases log's last id): see the audit package doc
-- for why that is still this instant's truth.
-- Returns JSON: {streams: [{last, delivered, pending: [[id, fields|false]...],
-- undelivered: [[id, fields]...], truncated}...], rounds: [[fields, buyers]...],
-- and with ARGV[4]: now (ms, this server's clock), holds: [[id, user,
-- items]...], holds_truncated, settled: [entry...] (scored >= now),
-- settled_truncated, releases_last}
local max, n, k = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4] or '')
local pairs_end = #KEYS
if k then pairs_end = #KEYS - 3 end
if not max or max < 1 or not n or n < 1 or n > pairs_end or (pairs_end - n) % 2 ~= 0
    or (k and (pairs_end - n) ~= 2 * k) then
  return redis.error_reply('ERR snapshot: bad arguments')
end

local function stream(key)
  local out = {pending = {}, undelivered = {}, truncated = false, last = '0-0', delivered = '0-0'}
  if redis.call('EXISTS', key) == 0 then return out end
  -- The last id ever added, even when trimming left the stream empty.
  local info = redis.call('XINFO', 'STREAM', key)
  for j = 1, #info, 2 do
    if info[j] == 'last-generated-id' then out.last = info[j + 1] end
  end
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', key)
  if ok then
    for _, g in ipairs(groups) do
      local gi = {}
      for j = 1, #g, 2 do gi[g[j]] = g[j + 1] end
      if gi['name'] == ARGV[1] then out.delivered = gi['last-delivered-id'] end
    end
    local pend = {}
    if out.delivered ~= '0-0' then
      pend = redis.call('XPENDING', key, ARGV[1], '-', '+', max)
    end
    for _, p in ipairs(pend) do
      local e = redis.call('XRANGE', key, p[1], p[1])
      out.pending[#out.pending + 1] = {p[1], e[1] and e[1][2] or false}
    end
    if #pend >= max then out.truncated = true end
  end
  local after = '(' .. out.delivered
  if out.delivered == '0-0' then after = '-' end
  local rest = redis.call('XRANGE', key, after, '+', 'COUNT', max)
  for _, e in ipairs(rest) do out.undelivered[#out.undelivered + 1] = {e[1], e[2]} end
  if #rest >= max then out.truncated = true end
  return out
end

local out = {streams = {}, rounds = {}}
for i = 1, n do out.streams[i] = stream(KEYS[i]) end
for i = n + 1, pairs_end, 2 do
  out.rounds[#out.rounds + 1] = {redis.call('HGETALL', KEYS[i]), redis.call('HGETALL', KEYS[i + 1])}
end
if k then
  local t = redis.call('TIME')
  out.now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  out.holds = {}
  local holds = redis.call('ZRANGE', KEYS[pairs_end + 1], 0, max - 1)
  out.holds_truncated = redis.call('ZCARD', KEYS[pairs_end + 1]) > max
  for _, id in ipairs(holds) do
    local h = redis.call('HMGET', ARGV[5] .. id, 'user', 'items')
    if h[1] and h[2] then out.holds[#out.holds + 1] = {id, h[1], h[2]} end
  end
  local log, from = KEYS[pairs_end + 2], string.format('%d', out.now)
  out.settled = redis.call('ZRANGE', log, from, '+inf', 'BYSCORE', 'LIMIT', 0, max)
  out.settled_truncated = redis.call('ZCOUNT', log, from, '+inf') > max
  out.releases_last = '0-0'
  if redis.call('EXISTS', KEYS[pairs_end + 3]) == 1 then
    local info = redis.call('XINFO', 'STREAM', KEYS[pairs_end + 3])
    for j = 1, #info, 2 do
      if info[j] == 'last-generated-id' then out.releases_last = info[j + 1] end
    end
  end
end
return cjson.encode(out)
