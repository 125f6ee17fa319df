-- rotate.lua: swap a session's refresh token and access jti atomically.
-- Single use with reuse detection: the presented token's MAC was already
-- checked, so a token for this session that is not the current one is an
-- earlier, used token. Someone replays it: revoke the whole session.
--
-- KEYS[1]  the session hash
-- ARGV[1]  sha256 (hex) of the presented refresh token
-- ARGV[2]  sha256 (hex) of the new refresh token
-- ARGV[3]  the new access jti
-- ARGV[4]  the idle expiry in milliseconds
--
-- Returns {0} when the session is gone, {-1} on reuse (the session is then
-- deleted), or {1, uid, role, email, name} after rotating.
local ttl = tonumber(ARGV[4])
if ARGV[1] == '' or ARGV[2] == '' or ARGV[3] == '' or not ttl or ttl <= 0 then
  return redis.error_reply('ERR rotate.lua: bad arguments')
end
local current = redis.call('HGET', KEYS[1], 'rt')
if not current then
  return {0}
end
if current ~= ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {-1}
end
redis.call('HSET', KEYS[1], 'rt', ARGV[2], 'jti', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
local v = redis.call('HMGET', KEYS[1], 'uid', 'role', 'email', 'name')
return {1, v[1] or '', v[2] or '', v[3] or '', v[4] or ''}
