#!/usr/bin/env bash
# `make bench`: the four ratios of the performance targets, each measured
# against its own baseline in the same run, on the same machine, printed
# together at the end (medians over BENCH_RUNS); then the hot-path Go
# benchmarks. Loopback only; every step is bounded in time and the script
# stops what it started.
#
#   1. builds shop, starts a private `shop serve` on 127.0.0.1:$BENCH_PORT
#      over a fresh database shop_bench and a key prefix of its own, with the
#      rate limiter on (a limit no client reaches, keyed per client through
#      X-Forwarded-For), so every request pays what it pays in production;
#   2. per run (BENCH_RUNS):
#      a. purchases: `shop loadtest` with 200 shoppers and 200 connections
#         for 20 s on one core (--procs 1), against `redis-benchmark -c 50`
#         running the reserve script (internal/order/lines.lua and
#         reserve.lua, composed as the server composes them),
#         with the server's KEYS/ARGV layout, every call on the buy path;
#      b. p99 of purchases at a fixed rate of half of (a)'s throughput,
#         same connections (open model);
#      c. product reads: GET /api/v1/products/{sku} of (a)'s product (a live
#         round, `available` read live) against GET /healthz, same client,
#         same connections, with `shop loadtest get` and with wrk when it is
#         installed (apt-get install wrk; skipped with a note otherwise);
#   3. the order writer: BenchmarkWriterDrain against BenchmarkWriterCopy
#      (the same orders and items COPYed into the same tables) in one
#      `go test`, -count BENCH_RUNS;
#   4. the four ratios, next to each other, with the bare figures and the
#      machine's load average at the start and the end;
#   5. the hot-path Go benchmarks, with the whole app's purchase, product
#      read and /healthz (access log batched, line by line, off).
#
# Knobs (environment): BENCH_RUNS (default 1; medians are printed),
# BENCH_DURATION (20s), BENCH_READ_DURATION (10s), BENCH_CONNECTIONS (200),
# BENCH_USERS (200), BENCH_PORT (18090), BENCH_RATE (extra fixed rates for a
# latency table, e.g. "1000 3000 5000"; none by default), BENCH_PROFILE=1
# (a 10 s CPU profile of the server during the first purchase attack, and
# its top; BENCH_PROFILE_DELAY, default 8, is when it starts),
# BENCH_LOADTEST_PROFILE=1 (the load generator's own CPU profile of the
# first attack, .run/bench/loadtest-cpu.pprof), BENCH_SKIP_GO=1 (skip steps
# 3 and 5), BENCH_SKIP_HOT=1 (skip step 5), BENCH_WRITER_ORDERS (200000).
# Output files go to .run/bench/; the summary also to .run/bench/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

RUNS=${BENCH_RUNS:-1}
DURATION=${BENCH_DURATION:-20s}
READ_DURATION=${BENCH_READ_DURATION:-10s}
CONNS=${BENCH_CONNECTIONS:-200}
USERS=${BENCH_USERS:-200}
PORT=${BENCH_PORT:-18090}
RATE=${BENCH_RATE:-}
WRITER_ORDERS=${BENCH_WRITER_ORDERS:-200000}
RB_CLIENTS=50
RB_REQUESTS=200000
OUT=.run/bench
PREFIX="shopbench:$$:"
ADMIN_EMAIL=bench-admin@loadtest.invalid
ADMIN_PASSWORD=bench-admin-password

for tool in redis-benchmark redis-cli psql curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is required (apt-get install redis-tools postgresql-client curl)" >&2; exit 1; }
done
HAVE_WRK=
command -v wrk >/dev/null && HAVE_WRK=1
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
rm -f "$OUT"/*.tsv "$OUT"/loadtest-*.json "$OUT"/redis-benchmark-*.csv "$OUT"/get-*.json "$OUT"/wrk-*.txt
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

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(load)
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $LOAD_START"
echo "== $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3), $(psql -V | cut -d' ' -f3-)${HAVE_WRK:+, $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)}"
[ -n "$HAVE_WRK" ] || echo "== wrk not installed: the product reads are measured with shop loadtest get only (apt-get install wrk adds the second client)"

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
  # The reserve script as internal/order/lines.go's withLines makes it.
  SHA=$(rcli SCRIPT LOAD "$(printf '#!lua\n'; cat internal/order/lines.lua internal/order/reserve.lua)")
  rcli unlink "${RBP}orders" "${RBP}orders:due" "${RBP}sale:{rb}:buyers" >/dev/null
  rcli hset "${RBP}sale:{rb}" round 1 quantity 1000000000000 available 1000000000000 limit 0 \
    starts_ms 0 ends_ms 0 price_cents 100 >/dev/null
}

json_field() { grep -o "\"$1\": [-0-9.a-z]*" "$2" | tail -1 | awk '{print $2}' | tr -d ,; }
json_string() { grep -o "\"$1\": \"[^\"]*\"" "$2" | head -1 | cut -d'"' -f4; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "n/a"}'; }
half() { awk -v a="$1" 'BEGIN {printf "%d", a / 2}'; }
# median of column $2 of file $1 (tab-separated; "n/a" and empty ignored)
median() {
  [ -s "$1" ] || { echo n/a; return; }
  awk -F'\t' -v c="$2" '$c != "" && $c != "n/a" {print $c}' "$1" | sort -g |
    awk '{a[NR]=$1} END {if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'
}

loadtest_args=(--target "http://127.0.0.1:$PORT" --admin-email "$ADMIN_EMAIL" --admin-password "$ADMIN_PASSWORD"
  --users "$USERS" --units 1000000 --per-user-limit 0 --connections "$CONNS" --forwarded-for --procs 1 --json)

# purchases RUN: the HTTP attack, then the bare script; appends to
# purchases.tsv: run, attempts/s, p50, p99, ok, script ops/s, ratio, sku.
purchases() {
  local i=$1 lt="$OUT/loadtest-$1.json" rb="$OUT/redis-benchmark-$1.csv"
  if [ "$i" = 1 ] && [ "${BENCH_PROFILE:-}" = 1 ]; then
    # Profile the middle of the attack, after the shoppers are set up.
    ( sleep "${BENCH_PROFILE_DELAY:-8}"
      curl -sf -o "$OUT/cpu.pprof" "http://127.0.0.1:$((PORT + 1))/debug/pprof/profile?seconds=10" ) &
  fi
  local prof=()
  [ "$i" = 1 ] && [ -n "${BENCH_LOADTEST_PROFILE:-}" ] && prof=(--cpuprofile "$OUT/loadtest-cpu.pprof")
  bin/shop loadtest "${loadtest_args[@]}" --rate 0 --duration "$DURATION" "${prof[@]}" >"$lt" ||
    echo "bench: loadtest run $i reported a failure (see $lt)" >&2
  rb_reset
  redis-benchmark -h "$RHOST" -p "$RPORT" --dbnum "$RDB" -c "$RB_CLIENTS" -n "$RB_REQUESTS" -r 1000000000 --csv \
    EVALSHA "$SHA" 8 "${RBP}orders" "${RBP}order:__rand_int__" "${RBP}orders:pending:{__rand_int__}" \
    "${RBP}idem:{__rand_int__}:__rand_int__" "${RBP}nocart" "${RBP}orders:due" "${RBP}sale:{rb}" "${RBP}sale:{rb}:buyers" \
    __rand_int__ __rand_int__ 604800000 86400000 1 0 900000 0 1 rb 1 "${RBP}sale:{rb}:changed" >"$rb"
  # The bare script's keys (200k status hashes with a week's TTL) go now.
  rcli --scan --pattern "${RBP}*" | xargs -r -n 500 redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" unlink >/dev/null
  local http script
  http=$(json_field attempts_per_sec "$lt"); script=$(awk -F'","' 'NR==2 {print $2}' "$rb")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$http" "$(json_field p50 "$lt")" "$(json_field p99 "$lt")" \
    "$(json_field ok "$lt")" "$script" "$(ratio "$http" "$script")" "$(json_string sku "$lt")" >>"$OUT/purchases.tsv"
}

# fixed_rate RUN RATE FILE: purchases at RATE/s, same connections, 15 s;
# appends run, rate, attempts/s, p50, p90, p99, max, ok to FILE.
fixed_rate() {
  local rt="$OUT/loadtest-rate-$1-$2.json"
  bin/shop loadtest "${loadtest_args[@]}" --rate "$2" --duration 15s >"$rt" ||
    echo "bench: the loadtest at $2/s reported a failure (see $rt)" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(json_field attempts_per_sec "$rt")" "$(json_field p50 "$rt")" \
    "$(json_field p90 "$rt")" "$(json_field p99 "$rt")" "$(json_field max "$rt")" "$(json_field ok "$rt")" >>"$3"
}

# get_load RUN NAME PATH: `shop loadtest get`; prints requests/s and p99.
get_load() {
  local f="$OUT/get-$1-$2.json"
  bin/shop loadtest get --target "http://127.0.0.1:$PORT" --path "$3" --connections "$CONNS" --duration "$READ_DURATION" \
    --addresses "$USERS" --procs 1 --json >"$f" || echo "bench: loadtest get $3 reported a failure (see $f)" >&2
  echo "$(json_field requests_per_sec "$f") $(json_field p99 "$f")"
}

# wrk_load RUN NAME PATH: wrk, one thread (one core, like --procs 1), the
# same connections and X-Forwarded-For addresses; prints requests/s, p99 ms.
wrk_load() {
  local f="$OUT/wrk-$1-$2.txt"
  WRK_ADDRESSES=$USERS wrk -t1 -c "$CONNS" -d "$READ_DURATION" --timeout 10s --latency -s scripts/wrk-forwarded.lua \
    "http://127.0.0.1:$PORT$3" >"$f" 2>&1 || echo "bench: wrk $3 failed (see $f)" >&2
  if grep -q 'Non-2xx' "$f"; then echo "bench: wrk $3 had answers other than 2xx (see $f)" >&2; fi
  local rps p99
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/, "", v); v/=1000} else if (v ~ /ms$/) sub(/ms$/, "", v);
    else if (v ~ /s$/) {sub(/s$/, "", v); v*=1000}; print v}' "$f")
  echo "${rps:-n/a} ${p99:-n/a}"
}

# reads RUN SKU: the product (live round, `available` read live) against
# /healthz, with each client; appends run, client, product/s, p99,
# healthz/s, p99, ratio to reads.tsv.
reads() {
  local i=$1 product="/api/v1/products/$2" body
  body=$(curl -sf "http://127.0.0.1:$PORT$product" -H "X-Forwarded-For: 198.18.0.1" || true)
  case $body in *'"available":'*) ;; *) echo "bench: GET $product has no live available: $body" >&2 ;; esac
  local p h
  read -r -a p <<<"$(get_load "$i" product "$product")"
  read -r -a h <<<"$(get_load "$i" healthz /healthz)"
  printf '%s\tloadtest\t%s\t%s\t%s\t%s\t%s\n' "$i" "${p[0]}" "${p[1]}" "${h[0]}" "${h[1]}" "$(ratio "${p[0]}" "${h[0]}")" >>"$OUT/reads.tsv"
  [ -n "$HAVE_WRK" ] || return 0
  read -r -a p <<<"$(wrk_load "$i" product "$product")"
  read -r -a h <<<"$(wrk_load "$i" healthz /healthz)"
  printf '%s\twrk\t%s\t%s\t%s\t%s\t%s\n' "$i" "${p[0]}" "${p[1]}" "${h[0]}" "${h[1]}" "$(ratio "${p[0]}" "${h[0]}")" >>"$OUT/reads.tsv"
}

echo
echo "== per run: purchases (shop loadtest, $CONNS connections, $DURATION) vs redis-benchmark -c $RB_CLIENTS (reserve.lua);"
echo "   purchases at half that rate; GET product vs GET /healthz ($READ_DURATION each, $CONNS connections)"
for i in $(seq 1 "$RUNS"); do
  echo "-- run $i, load $(load)"
  purchases "$i"
  IFS=$'\t' read -r _ http p50 p99 ok script r sku < <(tail -1 "$OUT/purchases.tsv")
  printf '   purchases %s/s (p50 %s ms, p99 %s ms, invariants ok: %s), bare script %s ops/s: ratio %s\n' "$http" "$p50" "$p99" "$ok" "$script" "$r"
  if [ "$(half "${http:-0}")" -gt 0 ]; then
    fixed_rate "$i" "$(half "$http")" "$OUT/halfrate.tsv"
    IFS=$'\t' read -r _ rate got _ _ p99h _ okh < <(tail -1 "$OUT/halfrate.tsv")
    printf '   at %s/s (half): %s/s, p99 %s ms (invariants ok: %s)\n' "$rate" "$got" "$p99h" "$okh"
  fi
  reads "$i" "$sku"
  while IFS=$'\t' read -r run client pr pp hr hp rr; do
    if [ "$run" = "$i" ]; then
      printf '   %-8s GET product %s/s (p99 %s ms), GET /healthz %s/s (p99 %s ms): ratio %s\n' "$client" "$pr" "$pp" "$hr" "$hp" "$rr"
    fi
  done <"$OUT/reads.tsv"
done

if [ -n "$RATE" ]; then
  echo
  echo "== latency at fixed rates: shop loadtest --rate R --connections $CONNS --duration 15s"
  printf '%-8s %12s %9s %9s %9s %9s %6s\n' rate "attempts/s" "p50 ms" "p90 ms" "p99 ms" "max ms" ok
  for rate in $RATE; do
    fixed_rate 1 "$rate" "$OUT/rates.tsv"
    IFS=$'\t' read -r _ r a p50 p90 p99 mx ok < <(tail -1 "$OUT/rates.tsv")
    printf '%-8s %12s %9s %9s %9s %9s %6s\n' "$r" "$a" "$p50" "$p90" "$p99" "$mx" "$ok"
  done
fi

if [ "${BENCH_PROFILE:-}" = 1 ] && [ -s "$OUT/cpu.pprof" ]; then
  echo; echo "== server CPU profile (10 s of the first attack): go tool pprof -top bin/shop $OUT/cpu.pprof"
  go tool pprof -top -nodecount=35 bin/shop "$OUT/cpu.pprof" 2>/dev/null | sed -n '1,45p'
fi

kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

if [ "${BENCH_SKIP_GO:-}" != 1 ]; then
  SHOP_TEST_REDIS_URL=${SHOP_TEST_REDIS_URL:-$(ensure_redis 1)}
  SHOP_TEST_DATABASE_URL=${SHOP_TEST_DATABASE_URL:-$PG_ADMIN_URL}
  export SHOP_TEST_REDIS_URL SHOP_TEST_DATABASE_URL
  echo; echo "== order writer: go test -run '^\$' -bench 'WriterDrain\$|WriterCopy\$' -benchtime ${WRITER_ORDERS}x -count $RUNS ./internal/order"
  go test -run '^$' -bench 'WriterDrain$|WriterCopy$' -benchtime "${WRITER_ORDERS}x" -count "$RUNS" -timeout 30m ./internal/order |
    tee "$OUT/writer.txt" | grep -E '^(Benchmark|ok|FAIL)'
  # orders/s of each run, by benchmark
  awk '/^BenchmarkWriter(Drain|Copy)/ {for (f = 1; f < NF; f++) if ($(f+1) == "orders/s") {
    split($1, n, "-"); sub(/^BenchmarkWriter/, "", n[1]); print n[1] "\t" $f}}' "$OUT/writer.txt" >"$OUT/writer.tsv"
  awk -F'\t' '$1 == "Drain" {print $2}' "$OUT/writer.tsv" >"$OUT/drain.tsv"
  awk -F'\t' '$1 == "Copy" {print $2}' "$OUT/writer.tsv" >"$OUT/copy.tsv"
fi

LOAD_END=$(load)
{
  echo
  echo "== the four ratios: medians of $RUNS run(s), each ratio measured within one run; load $LOAD_START at the start, $LOAD_END at the end"
  printf '%-58s %14s %14s %9s %8s\n' "" "measured" "baseline" "ratio" target
  printf '%-58s %14s %14s %9s %8s\n' "HTTP purchases/s / bare reserve script (redis-benchmark -c $RB_CLIENTS)" \
    "$(median "$OUT/purchases.tsv" 2)" "$(median "$OUT/purchases.tsv" 6)" "$(median "$OUT/purchases.tsv" 7)" ">= 0.35"
  printf '%-58s %14s %14s %9s %8s\n' "p99 ms of purchases at half the measured maximum" \
    "$(median "$OUT/halfrate.tsv" 6)" "at $(median "$OUT/halfrate.tsv" 2)/s" "" "<= 10"
  for client in loadtest wrk; do
    grep -q "	$client	" "$OUT/reads.tsv" 2>/dev/null || continue
    grep "	$client	" "$OUT/reads.tsv" >"$OUT/reads-$client.tsv"
    printf '%-58s %14s %14s %9s %8s\n' "GET product/s / GET /healthz/s ($client)" \
      "$(median "$OUT/reads-$client.tsv" 3)" "$(median "$OUT/reads-$client.tsv" 5)" "$(median "$OUT/reads-$client.tsv" 7)" ">= 0.5"
  done
  if [ -s "$OUT/drain.tsv" ] && [ -s "$OUT/copy.tsv" ]; then
    d=$(median "$OUT/drain.tsv" 1); c=$(median "$OUT/copy.tsv" 1)
    printf '%-58s %14s %14s %9s %8s\n' "order writer drain orders/s / COPY of the same rows" "$d" "$c" "$(ratio "$d" "$c")" ">= 0.8"
  fi
  echo "per run: $OUT/purchases.tsv, halfrate.tsv, reads.tsv, writer.tsv; reports in $OUT/"
} | tee "$OUT/summary.txt"

if [ "${BENCH_SKIP_GO:-}" = 1 ] || [ "${BENCH_SKIP_HOT:-}" = 1 ]; then exit 0; fi
echo; echo "== hot paths: go test -run '^\$' -bench 'Reserve\$|Allow\$|VerifyToken\$|AuthenticatedRequest|GetProductCached\$|Purchase\$|GetProduct\$|Healthz\$' -benchtime 3s -benchmem"
go test -run '^$' -bench 'Reserve$|Allow$|VerifyToken$|AuthenticatedRequest|GetProductCached$|Purchase$|GetProduct$|Healthz$' \
  -benchtime 3s -benchmem -timeout 10m ./internal/order ./internal/inventory ./internal/ratelimit ./internal/auth ./internal/shop |
  grep -E '^(Benchmark|ok|FAIL)'

if [ "${BENCH_SKIP_GO:-}" = 1 ] || [ "${BENCH_SKIP_HOT:-}" = 1 ]; then exit 0; fi
echo; echo "== stock events on the purchase path: go test -run '^\$' -bench ReserveEvents -benchtime 3s ./internal/order (off / PUBLISH in the script / async queue)"
go test -run '^$' -bench 'ReserveEvents' -benchtime 3s -timeout 10m ./internal/order | grep -E '^(Benchmark|ok|FAIL)'
echo; echo "== idle live streams: SHOP_LIVE_IDLE_STREAMS=10000 go test -run TestLiveIdleStreamCost -v ./e2e (memory and CPU per stream)"
SHOP_LIVE_IDLE_STREAMS=${SHOP_LIVE_IDLE_STREAMS:-10000} go test -count=1 -run 'TestLiveIdleStreamCost' -v -timeout 10m ./e2e | grep -E 'idle streams|^(ok|FAIL)' | grep -v live_cost_test
