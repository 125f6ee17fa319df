-- Hold: a cross-shard checkout's step on one partition other than the
-- order's home (Redis Cluster only; lines.lua is prepended). It checks
-- and takes that partition's lines as reserve.lua would, and writes a hold
-- record of what it took, indexed by deadline, so that a crash before the
-- commit is undone by the sweeper's repair (repair.go). All in one slot:
-- the partition's.
--
-- KEYS[1] the hold record (hash: attempt, user, home, items, deadline_ms)
-- KEYS[2] the partition's holds index (zset: order id by deadline_ms)
-- KEYS[3 + 3(i-1)] sale state of line i, KEYS[4 + 3(i-1)] its buyer
--         counts, KEYS[5 + 3(i-1)] its room passes
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] the attempt (a nonce of
--         this run of the saga)   ARGV[4] 'take', or 'check' (judge the
--         lines only: a refusal elsewhere is being ranked)
-- ARGV[5] the order's home partition   ARGV[6] the hold's lifetime (ms)
-- ARGV[7] number of lines n, then per line sku, qty, changes channel
-- ARGV[8 + 3n] the waiting room passes the buyer presented,
--         comma-separated ('' for none)
--
-- Returns {'ok', items_json}: taken now, or by this attempt before (a
--         resent call: the record's items again); '' in check mode
--      or {'busy'}: another attempt of the same order holds this partition
--      or {'fail', reason, sku...} as reserve.lua
local order_id, user, attempt, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local home, life, n = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local function bad(msg) return redis.error_reply('ERR hold: ' .. msg) end
if order_id == '' or user == '' or attempt == '' then return bad('empty order, user or attempt') end
if mode ~= 'take' and mode ~= 'check' then return bad('bad mode') end
if not home or home < 0 or not life or life < 1 then return bad('bad home or lifetime') end
if not n or n < 1 or n ~= math.floor(n) or #KEYS ~= 2 + 3 * n or #ARGV ~= 8 + 3 * n then
  return bad('bad line count')
end
local lines, err = read_lines(n, 8, 3)
if not lines then return bad(err) end
local passes = pass_set(ARGV[8 + 3 * n])

if mode == 'take' then
  local had = redis.call('HMGET', KEYS[1], 'attempt', 'items')
  if had[1] == attempt then return {'ok', had[2]} end
  if had[1] then return {'busy'} end
end

local now = now_ms()
local worst, failed, unreadable = check_lines(lines, user, now, passes)
if unreadable then return bad(unreadable) end
if worst then return refusal(worst, failed) end
if mode == 'check' then return {'ok', ''} end

local items_json = cjson.encode(take_lines(lines, user, 'SPUBLISH'))
local deadline = string.format('%d', now + life)
redis.call('HSET', KEYS[1], 'attempt', attempt, 'user', user, 'home', ARGV[5],
  'items', items_json, 'deadline_ms', deadline)
redis.call('ZADD', KEYS[2], deadline, order_id)
return {'ok', items_json}
