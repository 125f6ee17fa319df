package order

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// advanceLua moves the order stream's last generated id up to ARGV[2] if it
// is below (XSETID), creating the stream and the writers' group first when
// a failover lost them. KEYS[1] the stream; ARGV[1] the group, ARGV[2] the
// id. Returns the stream's last id afterwards.
var advanceScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
end
local last = '0-0'
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for j = 1, #info, 2 do
  if info[j] == 'last-generated-id' then last = info[j + 1] end
end
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local lm, ls = parts(last)
local wm, ws = parts(ARGV[2])
if not wm then return redis.error_reply('ERR advance: bad id ' .. ARGV[2]) end
if wm > lm or (wm == lm and ws > ls) then
  redis.call('XSETID', KEYS[1], ARGV[2])
  return ARGV[2]
end
return last`)

// AdvanceStream makes the order stream's last generated id at least id (a
// stream id PostgreSQL recorded): after a failover the promoted replica may
// lack the newest entries, already written, and an audit cuts PostgreSQL
// at the stream's last id (rows of later entries are taken for orders
// accepted after its snapshot). New entries are numbered past id anyway,
// since ids follow the clock; this only closes the gap until one comes.
// It returns the stream's last id.
func AdvanceStream(ctx context.Context, rdb redis.UniversalClient, prefix, id string) (string, error) {
	last, err := advanceScript.Run(ctx, rdb, []string{keys{prefix}.stream()}, group, id).Text()
	if err != nil {
		return "", fmt.Errorf("advance the order stream to %s: %w", id, err)
	}
	return last, nil
}
