-- Decide: the guarded status change of a spread order whose home partition
-- holds none of its lines (see owed.go): the status field moves from one
-- of the allowed values to the new one and the transition event is added
-- to the home's stream, in one step, exactly as inventory's release.lua
-- does it beside its units (here there are none in the home's slot; the
-- other partitions' releases follow the decision).
--
-- KEYS[1] the order's status hash   KEYS[2] the home's order stream
-- ARGV[1] guard field   ARGV[2] new value   ARGV[3] allowed values,
-- comma-separated; ARGV[4..] the transition event's field-value pairs
--
-- Returns {'ok'} or {'refused', the field's value or ''}.
local field, to, from = ARGV[1], ARGV[2], ARGV[3]
if field == '' or to == '' or from == '' or #ARGV < 6 or (#ARGV - 3) % 2 ~= 0 then
  return redis.error_reply('ERR decide: bad arguments')
end
local cur = redis.call('HGET', KEYS[1], field)
local allowed = false
if cur then
  for v in string.gmatch(from, '[^,]+') do
    if v == cur then allowed = true end
  end
end
if not allowed then return {'refused', cur or ''} end
redis.call('HSET', KEYS[1], field, to)
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
return {'ok'}
