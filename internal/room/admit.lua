-- Admit: one turn of a room's admitter, in the round's slot. A token
-- bucket (capacity one second of the rate, refilled by Redis's clock)
-- admits the next entries in order while the round has units available:
-- each gets a pass. Every instance may call it at any time; each token
-- admits exactly one entry. Formats: docs/design/room.md.
--
-- KEYS[1] sale hash (inventory's: read only)   KEYS[2] room state (hash)
-- KEYS[3] early entries   KEYS[4] late entries   KEYS[5] pass hash
-- KEYS[6] admission log (list of 'admitted_after ms', one per turn that
--         admitted anyone: an entry's admitted_at is the first turn whose
--         count passes its rank)
-- ARGV[1] round   ARGV[2] a random nonce (hex) the passes are made from
-- ARGV[3] the most entries to admit in this call
--
-- Returns {'stale'}, {'no_room'}, {'ended'}, or {status, admitted now,
-- admitted, early entries, available, now_ms, rate} with status 'waiting'
-- (before starts_at), 'sold_out' or 'ok': the room's shared state, which
-- the instance's ticket streams and reads are computed from (view.go).
local s = redis.call('HMGET', KEYS[1], 'round', 'available', 'starts_ms', 'ends_ms', 'room_rate', 'room_pass_ttl_ms')
if s[1] ~= ARGV[1] then return {'stale'} end
if not s[5] then return {'no_room'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts, ends = tonumber(s[3]), tonumber(s[4])
if ends > 0 and now >= ends then return {'ended'} end
local early = redis.call('ZCARD', KEYS[3])
local function answer(status, k, admitted)
  return {status, tostring(k), tostring(admitted), tostring(early), s[2] or '0', string.format('%d', now), s[5]}
end

local st = redis.call('HMGET', KEYS[2], 'admitted', 'tokens', 'last_ms')
local admitted = tonumber(st[1] or '0')
if now < starts then return answer('waiting', 0, admitted) end
local tokens = tonumber(st[2] or '0')
-- The bucket starts empty at starts_at: over any span of T seconds at
-- most rate x (T + 1) are admitted.
local last = tonumber(st[3] or s[3])
local rate = tonumber(s[5])
if now > last then
  tokens = math.min(rate, tokens + (now - last) * rate / 1000)
  last = now
end
local function save()
  redis.call('HSET', KEYS[2], 'admitted', string.format('%d', admitted), 'tokens', string.format('%.6f', tokens),
    'last_ms', string.format('%d', last))
end
if tonumber(s[2] or '0') <= 0 then
  save()
  return answer('sold_out', 0, admitted)
end

local total = early + redis.call('ZCARD', KEYS[4])
local k = math.min(math.floor(tokens), total - admitted, tonumber(ARGV[3]))
if k <= 0 then
  save()
  return answer('ok', 0, admitted)
end
local users = {}
if admitted < early then
  for _, m in ipairs(redis.call('ZRANGE', KEYS[3], admitted, math.min(early, admitted + k) - 1)) do
    users[#users + 1] = string.sub(m, 33, 48)
  end
end
if #users < k then
  local from = admitted + #users - early
  for _, m in ipairs(redis.call('ZRANGE', KEYS[4], from, from + k - #users - 1)) do
    users[#users + 1] = m
  end
end
local ttl = tonumber(s[6])
local exp = string.format('%d', now + ttl)
local now_s = string.format('%d', now)
for _, u in ipairs(users) do
  local hex = string.gsub(u, '.', function(c) return string.format('%02x', string.byte(c)) end)
  local id = string.sub(hex, 1, 8) .. '-' .. string.sub(hex, 9, 12) .. '-' .. string.sub(hex, 13, 16) ..
    '-' .. string.sub(hex, 17, 20) .. '-' .. string.sub(hex, 21, 32)
  -- The pass: a keyed digest of a fresh random nonce and the shopper;
  -- unguessable without the nonce, which never leaves this call.
  local pass = string.sub(redis.sha1hex(ARGV[2] .. ':' .. id), 1, 32)
  redis.call('HSET', KEYS[5], id, ARGV[1] .. ' ' .. pass .. ' ' .. exp .. ' ' .. now_s)
end
redis.call('PEXPIRE', KEYS[5], ttl + 60000)
admitted = admitted + #users
tokens = tokens - #users
redis.call('RPUSH', KEYS[6], string.format('%d', admitted) .. ' ' .. now_s)
save()
return answer('ok', #users, admitted)
