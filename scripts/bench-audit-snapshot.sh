#!/bin/bash
# Times the cluster audit's per-partition snapshot script (internal/audit's
# snapshot.lua) on a private redis-server with a settled log of N entries
# and a released set of N members: the script at BEFORE (a git revision)
# against the working tree's. Time per call from INFO commandstats.
#   PORT=6419 N=100000 BEFORE=21fcb94 scripts/bench-audit-snapshot.sh
set -euo pipefail
PORT=${PORT:-6419}; N=${N:-100000}; BEFORE=${BEFORE:-21fcb94}
dir=$(mktemp -d)
git show "$BEFORE:internal/audit/snapshot.lua" > "$dir/before.lua"
cp internal/audit/snapshot.lua "$dir/after.lua"
C="redis-cli -p $PORT"
redis-server --port "$PORT" --save '' --appendonly no --daemonize yes --pidfile "$dir/r.pid" --logfile "$dir/r.log"
trap 'kill "$(cat "$dir/r.pid")"; rm -rf "$dir"' EXIT
until $C PING >/dev/null 2>&1; do sleep 0.1; done
seed() { # $1 settled entries, $2 released members
  $C DEL s:stream s:sale s:buyers s:holds s:settled s:released s:releases >/dev/null
  $C XADD s:releases '*' order_id o skus x-1 >/dev/null
  $C HSET s:sale round 1 quantity 1000 available 1000 >/dev/null
  now=$($C EVAL "local t=redis.call('TIME') return tonumber(t[1])*1000" 0)
  $C EVAL "for i=1,tonumber(ARGV[2]) do redis.call('ZADD', KEYS[1], ARGV[1]+i, string.format('{\"order_id\":\"%08d-0000-4000-8000-000000000000\",\"user\":\"u-%d\",\"items\":[{\"sku\":\"x-1\",\"quantity\":1,\"price_cents\":100,\"round_id\":1}]}', i, i)) end return 1" 1 s:settled $((now - 300000)) "$1" >/dev/null
  $C EVAL "for i=1,tonumber(ARGV[1]) do redis.call('SADD', KEYS[1], string.format('%08d-0000-4000-8000-000000000001', i)) end return 1" 1 s:released "$2" >/dev/null
}
run() { # $1 script, $2 label, $3 its last key: the released set before, the releases log after
  $C CONFIG RESETSTAT >/dev/null
  for _ in 1 2 3 4 5; do $C --eval "$1" s:stream s:sale s:buyers s:holds s:settled "$3" , writers 100000 1 1 s:hold: >/dev/null; done
  echo "$2: $($C INFO commandstats | grep '^cmdstat_eval:' | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/') us per call"
}
seed "$N" "$N"
run "$dir/before.lua" "before, log $N, released $N" s:released
run "$dir/after.lua" "after, log $N, released $N" s:releases
seed "$N" 0
run "$dir/before.lua" "before, log $N, released 0" s:released
seed 0 "$N"
run "$dir/before.lua" "before, log 0, released $N" s:released
