#!/usr/bin/env bash
# `make bench-room`: issue 33's overload, with and without a waiting room,
# in one run on one server (BENCHMARKS.md, "Issue 33: overload with and
# without a room"). Loopback only; it stops what it started.
#
#   0. a redis-server of its own from deploy/redis.conf (AOF, appendfsync
#      always), a fresh database shop_benchroom, a private `shop serve` on
#      127.0.0.1:$ROOM_PORT with the rate limiter on (a limit no shopper
#      reaches, keyed per shopper through X-Forwarded-For), as make bench;
#      SHOP_ENV=dev with SHOP_PASSWORD_HASHING=fast so that signing up
#      thousands of shoppers takes seconds (no purchase checks a password);
#   1. max: purchases as fast as $ROOM_MAX_CONNS connections go for 10 s
#      (ROOM_MAX, when given, is taken instead);
#   2. unloaded: purchases at a tenth of max (open model) for 15 s: its p99
#      is the baseline;
#   2b. paced: purchases at max / 2, the room's rate, from 200 shoppers
#      for 15 s: the room's floor, what its admitted shoppers would see
#      if the waiting crowd cost nothing;
#   3. no room: $ROOM_USERS shoppers, purchases offered at ROOM_FACTOR (5) x
#      max (open model, vegeta) for $ROOM_DURATION over $ROOM_CONNS
#      connections, no per-shopper limit;
#   4. room: the same shoppers and connections; the round has a waiting
#      room admitting max / 2 shoppers a second; every shopper joins in the
#      $ROOM_JOIN_WINDOW (10 s) before the sale (all of the demand at
#      once; the joins take a few seconds), follows its ticket's
#      stream (ROOM_WAIT=poll: reads its ticket about when its turn is
#      due; internal/loadtest/room.go) and, once
#      admitted, buys one unit with its pass; nothing reaches the purchase
#      route before admission but 10 pass-less tries (403);
#   5. a side-by-side table, the ratios to the unloaded p99, and the bar
#      (room p99 <= 2 x unloaded p99, no 5xx); the room's p99 against the
#      paced one (what the crowd adds) and the paced one against the
#      unloaded one (the purchase path's own tail at that rate).
#
# Knobs: ROOM_MAX (purchases/s; measured when unset), ROOM_FACTOR (5),
# ROOM_USERS (8000), ROOM_CONNS (1000), ROOM_DURATION (20s), ROOM_PROCS
# (the load generator's GOMAXPROCS, 1 as in make bench; 0: all cores),
# ROOM_JOIN_WINDOW (10s), ROOM_WAIT (events: the waiting shoppers follow
# their tickets' streams; poll: they read their tickets), ROOM_POLL_MAX
# (2s, with poll: the longest a waiting shopper goes between two ticket
# reads), ROOM_REDIS_DIR (where Redis keeps its AOF, default
# .run/bench-room/redis; /dev/shm, a tmpfs, shows the tail without the
# disk's fsyncs), ROOM_PORT (18190), ROOM_PROFILE=1 (an 8 s server CPU profile in each
# overload phase, and its top). Output: .run/bench-room/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

FACTOR=${ROOM_FACTOR:-5}
USERS=${ROOM_USERS:-8000}
CONNS=${ROOM_CONNS:-1000}
MAX_CONNS=${ROOM_MAX_CONNS:-200}
DURATION=${ROOM_DURATION:-20s}
JOIN_WINDOW=${ROOM_JOIN_WINDOW:-10s}
WAIT=${ROOM_WAIT:-events}
POLL_MAX=${ROOM_POLL_MAX:-2s}
PROCS=${ROOM_PROCS:-1}
PORT=${ROOM_PORT:-18190}
RPORT=$((PORT + 9))
OUT=.run/bench-room
PREFIX="shopbenchroom:$$:"
ADMIN_EMAIL=bench-admin@loadtest.invalid
ADMIN_PASSWORD=bench-admin-password
for tool in redis-server redis-cli psql curl jq; do
  command -v "$tool" >/dev/null || { echo "bench-room: $tool is required" >&2; exit 1; }
done

REDIS_DIR=${ROOM_REDIS_DIR:+$ROOM_REDIS_DIR/shop-bench-room-redis}
REDIS_DIR=${REDIS_DIR:-$PWD/$OUT/redis}
rm -rf "$OUT" "$REDIS_DIR" && mkdir -p "$OUT/redis" "$REDIS_DIR" bin
redis-server deploy/redis.conf --daemonize yes --bind 127.0.0.1 --port "$RPORT" --dir "$REDIS_DIR" \
  --save "" --appendfsync always --logfile "$PWD/$OUT/redis/redis.log" >/dev/null
wait_port "$RPORT" || { echo "bench-room: redis-server on $RPORT did not start" >&2; exit 1; }
REDIS_URL=redis://127.0.0.1:$RPORT/0
rcli() { redis-cli -h 127.0.0.1 -p "$RPORT" "$@"; }
rcli config set latency-monitor-threshold 5 >/dev/null # Redis's own stalls, in $OUT/redis-latency.txt
PG_ADMIN_URL=$(ensure_postgres postgres)
DB_URL=${PG_ADMIN_URL/\/postgres\?/\/shop_benchroom?}
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  rcli shutdown nosave >/dev/null 2>&1 || true
  [ -z "${ROOM_REDIS_DIR:-}" ] || rm -rf "$REDIS_DIR"
  PGOPTIONS='-c client_min_messages=warning' psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_benchroom' >/dev/null || true
}
trap cleanup EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(load)
echo "== machine: $(nproc) cores, load $LOAD_START; $(go version | cut -d' ' -f3), redis $(redis-server --version | cut -d' ' -f3 | cut -d= -f2)"

go build -o bin/shop ./cmd/shop
PGOPTIONS='-c client_min_messages=warning' psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_benchroom' >/dev/null
SHOP_DATABASE_URL=$DB_URL bin/shop migrate --create-db >/dev/null
SHOP_DATABASE_URL=$DB_URL bin/shop user add --email "$ADMIN_EMAIL" --password "$ADMIN_PASSWORD" --role admin >/dev/null
SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d " \n")
env SHOP_ENV=dev SHOP_PASSWORD_HASHING=fast SHOP_JWT_SECRET=$SECRET SHOP_ADDR=127.0.0.1:$PORT SHOP_REDIS_URL=$REDIS_URL \
  SHOP_DATABASE_URL=$DB_URL SHOP_KEY_PREFIX=$PREFIX SHOP_RATE_LIMIT=100000/10s SHOP_TRUSTED_PROXIES=127.0.0.1 \
  SHOP_LOG_LEVEL=${ROOM_LOG_LEVEL:-info} bin/shop serve --pprof-addr "127.0.0.1:$((PORT + 1))" >"$OUT/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || { echo "bench-room: server did not start, see $OUT/server.log" >&2; exit 1; }

# CPU seconds (user + system) of a process so far, and of the machine.
TICKS=$(getconf CLK_TCK)
cpu_of() { awk -v t="$TICKS" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }
machine_busy() { awk -v t="$TICKS" '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / t}' /proc/stat; }
REDIS_PID=$(rcli info server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')

base=(--target "http://127.0.0.1:$PORT" --admin-email "$ADMIN_EMAIL" --admin-password "$ADMIN_PASSWORD"
  --forwarded-for --json --procs "$PROCS" --setup-workers 16 --units 1000000)
# run NAME ARGS...: one loadtest into NAME.json; the CPU the server,
# Redis and the machine used meanwhile (with the set-up) into NAME.cpu.
run() {
  local name=$1; shift
  buckets >"$OUT/$name.hist0"
  pool >"$OUT/$name.pool0"
  local s0 r0 m0 t0; s0=$(cpu_of "$server_pid"); r0=$(cpu_of "$REDIS_PID"); m0=$(machine_busy); t0=$(date +%s.%N)
  local prof=
  if [ "${ROOM_PROFILE:-}" = 1 ] && [[ $name == overload-* ]]; then
    # 8 s of the attack, from 1 s after its purchases begin (the reserve
    # script's calls move): the shoppers' sign-ups before it are left out.
    (calls=$(reserve_calls); for _ in $(seq 1 1800); do [ "$(reserve_calls)" != "$calls" ] && break; sleep 0.1; done; sleep 1
     curl -sf -o "$OUT/$name.pprof" "http://127.0.0.1:$((PORT + 1))/debug/pprof/profile?seconds=8") &
    prof=$!
  fi
  bin/shop loadtest "${base[@]}" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err" ||
    echo "bench-room: $name reported a failure (see $OUT/$name.json, $OUT/$name.err)" >&2
  [ -z "$prof" ] || wait "$prof" || true
  printf '%s %s %s %s\n' "$(awk -v a="$s0" -v b="$(cpu_of "$server_pid")" 'BEGIN {print b - a}')" \
    "$(awk -v a="$r0" -v b="$(cpu_of "$REDIS_PID")" 'BEGIN {print b - a}')" \
    "$(awk -v a="$m0" -v b="$(machine_busy)" 'BEGIN {print b - a}')" \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')" >"$OUT/$name.cpu"
  buckets >"$OUT/$name.hist1"
  pool >"$OUT/$name.pool1"
}
# The server's Redis pool: commands that found no free connection, and
# waits that timed out ("misses timeouts"); pool_of NAME: the run's.
pool() {
  curl -sf "http://127.0.0.1:$PORT/metrics" | awk '
    /^shop_redis_pool_misses_total / {m = $NF} /^shop_redis_pool_timeouts_total / {t = $NF} END {print m + 0, t + 0}'
}
pool_of() { paste -d' ' "$OUT/$1.pool0" "$OUT/$1.pool1" 2>/dev/null | awk '{printf "%d / %d", $3 - $1, $4 - $2}' || echo n/a; }
# The server's own histogram of the purchase route (from the request read
# to the answer written), summed over statuses: "le count" lines;
# server_p99 NAME: the p99 of the run's purchases by it (ms, interpolated
# in the bucket), to tell the server's time from the client's queueing.
buckets() {
  curl -sf "http://127.0.0.1:$PORT/metrics" | awk '
    /^shop_http_request_duration_seconds_bucket\{/ && /method="POST"/ && /route="[^"]*purchase"/ {
      match($0, /le="[^"]*"/); c[substr($0, RSTART + 4, RLENGTH - 5)] += $NF}
    END {for (l in c) print l, c[l]}' | sort -g
}
server_p99() {
  awk 'FILENAME ~ /hist0$/ {b[$1] = $2; next} {d[$1] = $2 - b[$1]; les[++n] = $1}
    END {total = d["+Inf"]; if (total <= 0) {print "n/a"; exit}
      want = 0.99 * total; prev = 0; pc = 0
      for (i = 1; i <= n; i++) {l = les[i]; if (l == "+Inf") {printf ">%.0f", prev * 1000; exit}
        if (d[l] >= want) {printf "%.1f", (prev + (l - prev) * (want - pc) / (d[l] - pc)) * 1000; exit}
        prev = l; pc = d[l]}}' "$OUT/$1.hist0" "$OUT/$1.hist1" 2>/dev/null || echo n/a
}
reserve_calls() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk '/^shop_reserve_script_seconds_count/ {print $NF}'; }
j() { jq -r "$1 // \"n/a\"" "$OUT/$2.json" 2>/dev/null || echo n/a; }
# 5xx answers, and answers that never came (timeouts, refused: code 0).
fivexx() { jq -r '[.attack.status_codes | to_entries[] | select((.key | tonumber) >= 500) | .value] | add // 0' "$OUT/$1.json" 2>/dev/null || echo n/a; }
noanswer() { jq -r '.attack.status_codes["0"] // 0' "$OUT/$1.json" 2>/dev/null || echo n/a; }

if [ -n "${ROOM_MAX:-}" ]; then
  MAX=$ROOM_MAX; echo "== max: $MAX purchases/s (ROOM_MAX)"
else
  run max --users 200 --per-user-limit 0 --connections "$MAX_CONNS" --rate 0 --duration 10s
  MAX=$(j '.attack.accepted_per_sec | floor' max)
  echo "== max: $MAX purchases/s accepted as fast as $MAX_CONNS connections go (p99 $(j .attack.latency_ms.p99 max) ms)"
fi
[[ $MAX =~ ^[0-9]+$ ]] && [ "$MAX" -gt 0 ] || { echo "bench-room: no max rate" >&2; exit 1; }
LIGHT=$((MAX / 10)); OFFER=$((MAX * FACTOR)); ADMIT=$((MAX / 2))

run unloaded --users 200 --per-user-limit 0 --connections "$MAX_CONNS" --rate "$LIGHT" --duration 15s
echo "== unloaded: $LIGHT/s, p99 $(j .attack.latency_ms.p99 unloaded) ms"
# The room's floor: purchases at the rate the room admits, from 200
# shoppers, no crowd: what the admitted shoppers' purchases would see if
# the waiting crowd cost nothing.
run paced --users 200 --per-user-limit 0 --connections "$MAX_CONNS" --rate "$ADMIT" --duration 15s
echo "== paced: $ADMIT/s (the room's rate, no crowd), p99 $(j .attack.latency_ms.p99 paced) ms"
run overload-noroom --users "$USERS" --per-user-limit 0 --connections "$CONNS" --rate "$OFFER" --duration "$DURATION"
echo "== no room: offered $OFFER/s, sent $(j .attack.attempts_per_sec overload-noroom)/s, p99 $(j .attack.latency_ms.p99 overload-noroom) ms"
rcli latency reset >/dev/null
run overload-room --users "$USERS" --per-user-limit 1 --connections "$CONNS" --duration "$DURATION" \
  --waiting-room "$ADMIT" --join-window "$JOIN_WINDOW" --room-wait "$WAIT" --ticket-poll-max "$POLL_MAX"
{ echo "LATENCY LATEST (the room phase): event, at (unix s), latest ms, max ms"; rcli latency latest
  echo "LATENCY HISTORY aof-fsync-always"; rcli latency history aof-fsync-always; } >"$OUT/redis-latency.txt" 2>&1
echo "== room: admitting $ADMIT/s, $(j .room.admitted overload-room) admitted, p99 $(j .attack.latency_ms.p99 overload-room) ms"

U99=$(j .attack.latency_ms.p99 unloaded)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a != "n/a") printf "%.2f", a / b; else print "n/a"}'; }
cpu() { awk -v f="$2" '{printf "%.2f", $f / $4}' "$OUT/$1.cpu"; }
LOAD_END=$(load)
{
  echo
  echo "== issue 33 overload: max $MAX purchases/s; load $LOAD_START at the start, $LOAD_END at the end"
  printf '%-40s %14s %14s %14s\n' "" unloaded "no room" room
  printf '%-40s %14s %14s %14s\n' "shoppers / connections" "200 / $MAX_CONNS" "$USERS / $CONNS" "$USERS / $CONNS"
  printf '%-40s %14s %14s %14s\n' "purchases offered /s" "$LIGHT" "$OFFER" "joins: $USERS at once"
  printf '%-40s %14s %14s %14s\n' "purchases sent /s (room: admitted /s)" "$(j .attack.attempts_per_sec unloaded)" \
    "$(j .attack.attempts_per_sec overload-noroom)" "$(j .room.admitted_per_sec overload-room) (set $ADMIT)"
  printf '%-40s %14s %14s %14s\n' "purchases accepted /s" "$(j .attack.accepted_per_sec unloaded)" \
    "$(j .attack.accepted_per_sec overload-noroom)" "$(j .attack.accepted_per_sec overload-room)"
  printf '%-40s %14s %14s %14s\n' "purchases accepted" "$(j .attack.accepted unloaded)" \
    "$(j .attack.accepted overload-noroom)" "$(j .attack.accepted overload-room)"
  for q in p50 p90 p99 max; do
    printf '%-40s %14s %14s %14s\n' "purchase $q ms" "$(j .attack.latency_ms.$q unloaded)" \
      "$(j .attack.latency_ms.$q overload-noroom)" "$(j .attack.latency_ms.$q overload-room)"
  done
  printf '%-40s %14s %14s %14s\n' "  p99 inside the server (its histogram)" "$(server_p99 unloaded)" \
    "$(server_p99 overload-noroom)" "$(server_p99 overload-room)"
  printf '%-40s %14s %14s %14s\n' "5xx / no answer (timeout, refused)" "$(fivexx unloaded) / $(noanswer unloaded)" \
    "$(fivexx overload-noroom) / $(noanswer overload-noroom)" "$(fivexx overload-room) / $(noanswer overload-room)"
  printf '%-40s %14s %14s %14s\n' "ticket reads; their p99 ms" "" "" \
    "$(j .room.ticket_reads overload-room); $(j .room.ticket_latency_ms.p99 overload-room)"
  printf '%-40s %14s %14s %14s\n' "join p99 ms" "" "" "$(j .room.join_latency_ms.p99 overload-room)"
  printf '%-40s %14s %14s %14s\n' "Redis pool: no free conn / timed out" "$(pool_of unloaded)" "$(pool_of overload-noroom)" \
    "$(pool_of overload-room)"
  printf '%-40s %14s %14s %14s\n' "invariants ok" "$(j .ok unloaded)" "$(j .ok overload-noroom)" "$(j .ok overload-room)"
  printf '%-40s %14s %14s %14s\n' "cores: server / redis / machine (run)" \
    "$(cpu unloaded 1) / $(cpu unloaded 2) / $(cpu unloaded 3)" \
    "$(cpu overload-noroom 1) / $(cpu overload-noroom 2) / $(cpu overload-noroom 3)" \
    "$(cpu overload-room 1) / $(cpu overload-room 2) / $(cpu overload-room 3)"
  R99=$(j .attack.latency_ms.p99 overload-room); N99=$(j .attack.latency_ms.p99 overload-noroom)
  P99=$(j .attack.latency_ms.p99 paced)
  echo
  echo "paced at the room's rate ($ADMIT/s, 200 shoppers, no crowd): p50 $(j .attack.latency_ms.p50 paced) ms," \
    "p99 $P99 ms (inside the server $(server_p99 paced)), 5xx $(fivexx paced)," \
    "cores $(cpu paced 1) / $(cpu paced 2) / $(cpu paced 3)"
  echo "room p99 / paced p99:       $(ratio "$R99" "$P99")  (what the waiting crowd adds)"
  echo "paced p99 / unloaded p99:   $(ratio "$P99" "$U99")  (the purchase path's own tail at that rate)"
  echo "room p99 / unloaded p99:    $(ratio "$R99" "$U99")  (bar <= 2; 5xx in the room run: $(fivexx overload-room))"
  echo "no room p99 / unloaded p99: $(ratio "$N99" "$U99")  (5xx: $(fivexx overload-noroom))"
  echo
  echo "room purchases by when they were sent (ms from starts_at; 250 ms spans): from n p50 p99 max"
  jq -r '.room.purchase_timeline[]? | "\(.from_ms) \(.purchases) \(.p50_ms) \(.p99_ms) \(.max_ms)"' \
    "$OUT/overload-room.json" 2>/dev/null | column -t
  echo "reports: $OUT/{max,unloaded,paced,overload-noroom,overload-room}.json"
} | tee "$OUT/summary.txt"
if [ "${ROOM_PROFILE:-}" = 1 ]; then
  for p in overload-noroom overload-room; do
    [ -s "$OUT/$p.pprof" ] || continue
    echo; echo "== server CPU profile, $p (8 s): go tool pprof -top bin/shop $OUT/$p.pprof"
    go tool pprof -top -nodecount=25 bin/shop "$OUT/$p.pprof" 2>/dev/null | sed -n '1,32p'
  done | tee -a "$OUT/summary.txt"
fi
