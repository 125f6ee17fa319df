-- check.lua: is this access token's session alive and its jti current?
-- One round trip on every authenticated request: read, compare, and slide
-- the idle expiry, only when the session exists (never recreate it).
-- The slide writes only once the expiry has moved by more than 1/100 of
-- the idle TTL: a busy session costs the AOF one PEXPIRE per that much
-- time instead of one per request, and a session still ends between 99%
-- and 100% of the idle TTL after its last use.
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
-- PTTL is -1 only for a session without expiry (none is made so): slid.
if redis.call('PTTL', KEYS[1]) < ttl - math.floor(ttl / 100) then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {v[2] or '', v[3] or '', v[4] or '', v[5] or ''}
