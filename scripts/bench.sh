#!/usr/bin/env bash
# `make bench`: the purchase path measured end to end, next to the bare
# purchase script on the same Redis, in one run; then the order writer's
# drain rate and the hot-path Go benchmarks. Loopback only; every step is
# bounded in time and the script stops what it started.
#
#   1. builds shop, starts a private `shop serve` on 127.0.0.1:$BENCH_PORT
#      over a fresh database shop_bench and a key prefix of its own, with the
#      rate limiter on (a limit no shopper reaches, keyed per shopper through
#      X-Forwarded-For), so every purchase pays limiter + token + session +
#      reserve script, as in production;
#   2. `shop loadtest` with 200 shoppers and 200 connections for 20 s, on
#      one core (--procs 1) like the single-threaded redis-benchmark;
#   3. `redis-benchmark -c 50` running internal/order/reserve.lua, the
#      script the server runs, with the server's KEYS/ARGV layout, every
#      call on the buy path (random order and user ids, endless stock);
#   4. prints both throughputs and their ratio (target >= 0.25), then the
#      latency at fixed rates with the same connections (target p99 < 25 ms);
#   5. BenchmarkWriterDrain (target >= 20,000 orders/s) and the hot paths.
#
# Knobs (environment): BENCH_RUNS (loadtest/redis-benchmark pairs, default
# 1; the median ratio is printed), BENCH_DURATION (20s), BENCH_CONNECTIONS
# (200), BENCH_USERS (200), BENCH_PORT (18090), BENCH_RATE ("1000 3000 5000":
# the purchases/s of the latency runs), BENCH_PROFILE=1 (take a 10 s CPU
# profile of the server during the first loadtest and print its top;
# BENCH_PROFILE_DELAY, default 8, is when it starts),
# BENCH_LOADTEST_PROFILE=1 (the load generator's own CPU profile of the
# first loadtest, .run/bench/loadtest-cpu.pprof), BENCH_SKIP_GO=1 (skip
# step 5). Output files go to .run/bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

RUNS=${BENCH_RUNS:-1}
DURATION=${BENCH_DURATION:-20s}
CONNS=${BENCH_CONNECTIONS:-200}
USERS=${BENCH_USERS:-200}
PORT=${BENCH_PORT:-18090}
RATE=${BENCH_RATE:-1000 3000 5000}
RB_CLIENTS=50
RB_REQUESTS=200000
OUT=.run/bench
PREFIX="shopbench:$$:"
ADMIN_EMAIL=bench-admin@loadtest.invalid
ADMIN_PASSWORD=bench-admin-password

for tool in redis-benchmark redis-cli psql curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is required (apt-get install redis-tools postgresql-client curl)" >&2; exit 1; }
done
REDIS_URL=${SHOP_REDIS_URL:-$(ensure_redis 0)}
PG_ADMIN_URL=$(ensure_postgres postgres)
[ -n "$REDIS_URL" ] && [ -n "$PG_ADMIN_URL" ] || { echo "bench: need Redis and PostgreSQL (see make run)" >&2; exit 1; }
DB_URL=${PG_ADMIN_URL/\/postgres\?/\/shop_bench?}
# redis://HOST:PORT/DB
rhostport=${REDIS_URL#redis://}; rhostport=${rhostport%%/*}
RHOST=${rhostport%:*}; RPORT=${rhostport##*:}
RDB=${REDIS_URL##*/}; [[ $RDB =~ ^[0-9]+$ ]] || RDB=0
rcli() { redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" "$@"; }

mkdir -p "$OUT" bin
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  # Every key this run wrote starts with its prefix (server and script).
  rcli --scan --pattern "${PREFIX}*" | xargs -r -n 500 redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" unlink >/dev/null
  PGOPTIONS='-c client_min_messages=warning' psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_bench' >/dev/null || true
}
trap cleanup EXIT

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3), $(psql -V | cut -d' ' -f3-)"

go build -o bin/shop ./cmd/shop
PGOPTIONS='-c client_min_messages=warning' psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_bench' >/dev/null
SHOP_DATABASE_URL=$DB_URL bin/shop migrate --create-db >/dev/null
SHOP_DATABASE_URL=$DB_URL bin/shop user add --email "$ADMIN_EMAIL" --password "$ADMIN_PASSWORD" --role admin >/dev/null

pprof_args=()
[ "${BENCH_PROFILE:-}" = 1 ] && pprof_args=(--pprof-addr "127.0.0.1:$((PORT + 1))")
SHOP_JWT_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d " \n") SHOP_ADDR=127.0.0.1:$PORT SHOP_REDIS_URL=$REDIS_URL SHOP_DATABASE_URL=$DB_URL \
  SHOP_KEY_PREFIX=$PREFIX SHOP_RATE_LIMIT=100000/10s SHOP_TRUSTED_PROXIES=127.0.0.1 SHOP_LOG_LEVEL=${BENCH_LOG_LEVEL:-info} \
  bin/shop serve "${pprof_args[@]}" >"$OUT/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || { echo "bench: server did not start, see $OUT/server.log" >&2; exit 1; }

# The sale the bare script buys from: never runs out, no per-user limit.
RBP="${PREFIX}rb:"
SHA=
rb_reset() {
  # Loaded each time: a test run elsewhere may have flushed the script cache.
  SHA=$(rcli SCRIPT LOAD "$(cat internal/order/reserve.lua)")
  rcli unlink "${RBP}orders" "${RBP}sale:{rb}:buyers" >/dev/null
  rcli hset "${RBP}sale:{rb}" round 1 quantity 1000000000000 available 1000000000000 limit 0 \
    starts_ms 0 ends_ms 0 price_cents 100 >/dev/null
}

json_field() { grep -o "\"$1\": [-0-9.a-z]*" "$2" | tail -1 | awk '{print $2}' | tr -d ,; }

run_pair() {
  local i=$1 lt="$OUT/loadtest-$1.json" rb="$OUT/redis-benchmark-$1.csv"
  if [ "$i" = 1 ] && [ "${BENCH_PROFILE:-}" = 1 ]; then
    # Profile the middle of the attack, after the shoppers are set up.
    ( sleep "${BENCH_PROFILE_DELAY:-8}"
      curl -sf -o "$OUT/cpu.pprof" "http://127.0.0.1:$((PORT + 1))/debug/pprof/profile?seconds=10" ) &
  fi
  bin/shop loadtest --target "http://127.0.0.1:$PORT" --admin-email "$ADMIN_EMAIL" --admin-password "$ADMIN_PASSWORD" \
    --users "$USERS" --units 1000000 --per-user-limit 0 --rate 0 --connections "$CONNS" --duration "$DURATION" \
    --forwarded-for --procs 1 --json ${BENCH_LOADTEST_PROFILE:+--cpuprofile "$OUT/loadtest-cpu.pprof"} >"$lt" || echo "bench: loadtest run $i reported a failure (see $lt)" >&2
  rb_reset
  redis-benchmark -h "$RHOST" -p "$RPORT" --dbnum "$RDB" -c "$RB_CLIENTS" -n "$RB_REQUESTS" -r 1000000000 --csv \
    EVALSHA "$SHA" 7 "${RBP}orders" "${RBP}order:__rand_int__" "${RBP}orders:pending:{__rand_int__}" \
    "${RBP}idem:{__rand_int__}:__rand_int__" "${RBP}nocart" "${RBP}sale:{rb}" "${RBP}sale:{rb}:buyers" \
    __rand_int__ __rand_int__ 604800000 86400000 1 0 1 rb 1 >"$rb"
  local http p50 p99 ok script ratio
  http=$(json_field attempts_per_sec "$lt"); p50=$(json_field p50 "$lt"); p99=$(json_field p99 "$lt"); ok=$(json_field ok "$lt")
  script=$(awk -F'","' 'NR==2 {print $2}' "$rb")
  ratio=$(awk -v a="$http" -v b="$script" 'BEGIN {printf "%.3f", a / b}')
  printf '%-4s %14s %9s %9s %6s %20s %7s\n' "$i" "$http" "$p50" "$p99" "$ok" "$script" "$ratio"
  echo "$ratio" >>"$OUT/ratios"
  # The bare script's keys (200k status hashes with a week's TTL) go now.
  rcli --scan --pattern "${RBP}*" | xargs -r -n 500 redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" unlink >/dev/null
}

echo
echo "== purchase path: shop loadtest (HTTP, $CONNS connections, $DURATION) vs redis-benchmark -c $RB_CLIENTS (reserve.lua only)"
printf '%-4s %14s %9s %9s %6s %20s %7s\n' run "attempts/s" "p50 ms" "p99 ms" ok "script ops/s" ratio
rm -f "$OUT/ratios"
for i in $(seq 1 "$RUNS"); do run_pair "$i"; done
echo "median ratio: $(sort -n "$OUT/ratios" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') (target >= 0.25); reports in $OUT/"

# At full speed a closed loop of $CONNS connections has latency = $CONNS /
# throughput (Little's law): p99 there measures the queue, not the server.
# So latency is also measured open-model, at a fixed rate with the same
# $CONNS connections available.
echo
echo "== latency at fixed rates: shop loadtest --rate R --connections $CONNS --duration 15s (target p99 < 25 ms)"
printf '%-8s %12s %9s %9s %9s %9s %6s\n' rate "attempts/s" "p50 ms" "p90 ms" "p99 ms" "max ms" ok
for rate in $RATE; do
  rt="$OUT/loadtest-rate-$rate.json"
  bin/shop loadtest --target "http://127.0.0.1:$PORT" --admin-email "$ADMIN_EMAIL" --admin-password "$ADMIN_PASSWORD" \
    --users "$USERS" --units 1000000 --per-user-limit 0 --rate "$rate" --connections "$CONNS" --duration 15s \
    --forwarded-for --procs 1 --json >"$rt" || echo "bench: the loadtest at $rate/s reported a failure (see $rt)" >&2
  printf '%-8s %12s %9s %9s %9s %9s %6s\n' "$rate" "$(json_field attempts_per_sec "$rt")" "$(json_field p50 "$rt")" \
    "$(json_field p90 "$rt")" "$(json_field p99 "$rt")" "$(json_field max "$rt")" "$(json_field ok "$rt")"
done

if [ "${BENCH_PROFILE:-}" = 1 ] && [ -s "$OUT/cpu.pprof" ]; then
  echo; echo "== server CPU profile (10 s of the first attack): go tool pprof -top bin/shop $OUT/cpu.pprof"
  go tool pprof -top -nodecount=35 bin/shop "$OUT/cpu.pprof" 2>/dev/null | sed -n '1,45p'
fi

kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

[ "${BENCH_SKIP_GO:-}" = 1 ] && exit 0
SHOP_TEST_REDIS_URL=${SHOP_TEST_REDIS_URL:-$(ensure_redis 1)}
SHOP_TEST_DATABASE_URL=${SHOP_TEST_DATABASE_URL:-$PG_ADMIN_URL}
export SHOP_TEST_REDIS_URL SHOP_TEST_DATABASE_URL
echo; echo "== order writer: go test -run '^\$' -bench WriterDrain -benchtime 200000x ./internal/order (target >= 20000 orders/s)"
go test -run '^$' -bench 'WriterDrain' -benchtime 200000x -timeout 10m ./internal/order | grep -E '^(Benchmark|ok|FAIL)'
echo; echo "== hot paths: go test -run '^\$' -bench 'Reserve|Allow|VerifyToken|AuthenticatedRequest|GetProductCached' -benchtime 3s"
go test -run '^$' -bench 'Reserve$|Allow$|VerifyToken$|AuthenticatedRequest|GetProductCached$' -benchtime 3s -timeout 10m \
  ./internal/order ./internal/inventory ./internal/ratelimit ./internal/auth | grep -E '^(Benchmark|ok|FAIL)'
echo; echo "== stock events on the purchase path: go test -run '^\$' -bench ReserveEvents -benchtime 3s ./internal/order (off / PUBLISH in the script / async queue)"
go test -run '^$' -bench 'ReserveEvents' -benchtime 3s -timeout 10m ./internal/order | grep -E '^(Benchmark|ok|FAIL)'
echo; echo "== idle live streams: SHOP_LIVE_IDLE_STREAMS=10000 go test -run TestLiveIdleStreamCost -v ./e2e (memory and CPU per stream)"
SHOP_LIVE_IDLE_STREAMS=${SHOP_LIVE_IDLE_STREAMS:-10000} go test -count=1 -run 'TestLiveIdleStreamCost' -v -timeout 10m ./e2e | grep -E 'idle streams|^(ok|FAIL)' | grep -v live_cost_test
