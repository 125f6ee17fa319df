-- Remove the consumers of a group that hold nothing and have been idle
-- long enough: writers that died or were replaced (each restart under a
-- new name leaves one behind). XGROUP DELCONSUMER drops a consumer's
-- pending entries for good, so a consumer is removed only when it has
-- none; reading and removing in one script means no entry can be
-- delivered to it in between.
--
-- KEYS[1] the stream; ARGV[1] the group, ARGV[2] the least idle time in
-- ms, ARGV[3..] consumers never to remove (the caller's own).
-- Returns the names removed.
local keep = {}
for i = 3, #ARGV do keep[ARGV[i]] = true end
local minIdle = tonumber(ARGV[2])
local removed = {}
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
  if not keep[info['name']] and info['pending'] == 0 and info['idle'] >= minIdle then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    removed[#removed + 1] = info['name']
  end
end
return removed
