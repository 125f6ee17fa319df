-- check.lua: is this access token's session alive and its jti current?
-- One round trip on every authenticated request: read, compare, and slide
-- the idle expiry, only when the session exists (never recreate it).
--
-- KEYS[1]  the session hash
-- ARGV[1]  the access token's jti
-- ARGV[2]  the idle expiry in milliseconds
--
-- Returns {uid, role, email, name}, or nil when the session is gone or the
-- jti is not the current one (logged out, revoked, or refreshed since).
local ttl = tonumber(ARGV[2])
if ARGV[1] == '' or not ttl or ttl <= 0 then
  return redis.error_reply('ERR check.lua: bad arguments')
end
local v = redis.call('HMGET', KEYS[1], 'jti', 'uid', 'role', 'email', 'name')
if v[1] ~= ARGV[1] then
  return nil
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {v[2] or '', v[3] or '', v[4] or '', v[5] or ''}
