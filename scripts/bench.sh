#!/usr/bin/env bash
# `make bench`: the four ratios of the performance targets, each measured
# against its own baseline in the same run, on the same machine, printed
# together at the end (medians over BENCH_RUNS); then the hot-path Go
# benchmarks. Loopback only; every step is bounded in time and the script
# stops what it started.
#
#   0. starts a redis-server of its own from deploy/redis.conf (AOF,
#      appendfsync always), which every step uses;
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
#         same connections (open model), with the server's own view of
#         the same window (its latency histograms: the whole request and
#         the one script call; the writer's batches; PostgreSQL's commits)
#         and Redis's (its slow log: how long its commands took by its own
#         clock); with wrk too, paced at half of wrk's own maximum;
#      c. product reads: GET /api/v1/products/{sku} of (a)'s product (a live
#         round, `available` read live) against GET /healthz, same client,
#         same connections, with `shop loadtest get` and with wrk when it is
#         installed (apt-get install wrk; skipped with a note otherwise);
#      d. the plain client: the purchases again from `shop loadtest --procs
#         0` (vegeta's net/http client at the default GOMAXPROCS), at full
#         speed and at half of it, each half-rate attack beside GET
#         /healthz at the same rate from the same client; and the minimal
#         purchase script (scripts/bench-minimal.lua) as a second bare
#         reference beside reserve.lua; before each purchase attack the
#         AOF is rewritten (aof_settle);
#   3. the order writer: BenchmarkWriterDrain against BenchmarkWriterCopy
#      (the same orders and items COPYed into the same tables) in one
#      `go test`, -count BENCH_RUNS;
#   4. the four ratios, next to each other, with the bare figures, the
#      machine's load average at the start and the end and the host's
#      steal meanwhile; where the two cores went in each phase;
#   5. the hot-path Go benchmarks, with the whole app's purchase, product
#      read and /healthz (access log batched, line by line, off).
#
# Knobs (environment): BENCH_RUNS (default 1; medians are printed),
# BENCH_DURATION (20s), BENCH_READ_DURATION (10s), BENCH_CONNECTIONS (200),
# BENCH_USERS (200), BENCH_PORT (18090), BENCH_RATE (extra fixed rates for a
# latency table, e.g. "1000 3000 5000"; none by default), BENCH_PROFILE=1
# (a 10 s CPU profile of the server during the first purchase attack and
# an 8 s one of the first half-rate attack, and their tops;
# BENCH_PROFILE_DELAY, default 2, is how long after the purchases begin each starts),
# BENCH_LOADTEST_PROFILE=1 (the load generator's own CPU profile of the
# first attack, .run/bench/loadtest-cpu.pprof), BENCH_SKIP_GO=1 (skip steps
# 3 and 5), BENCH_SKIP_HOT=1 (skip step 5), BENCH_WRITER_ORDERS (200000),
# BENCH_SERVER_ENV (NAME=VALUE words for the server only, to try a setting:
# e.g. "GOGC=200 SHOP_REDIS_PIPELINE_DELAY=50us"), BENCH_SERVER_ARGS (flags
# of shop serve, e.g. "--linger 10ms"), BENCH_WRITER_NICE=N (the order
# writer as a `shop writer` process of its own at nice N),
# BENCH_REDIS_FSYNC (always: the bench's own redis-server on
# BENCH_REDIS_PORT, default BENCH_PORT + 9, started from deploy/redis.conf
# with this appendfsync; shared: the machine's Redis as found),
# BENCH_REDIS_DIR (where that server keeps its AOF, default .run/bench/redis;
# e.g. /dev/shm, a tmpfs whose fsync waits for no disk: an experiment that
# shows the disk's share of the tail, not a way to run).
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
# The bench's Redis is a redis-server of its own with deploy/redis.conf,
# the production settings: the AOF on with appendfsync always
# (BENCH_REDIS_FSYNC), so every write pays its fsync here as there.
# BENCH_REDIS_FSYNC=shared uses the machine's Redis as found instead.
FSYNC=${BENCH_REDIS_FSYNC:-always}
OWN_REDIS=
if [ -n "${SHOP_REDIS_URL:-}" ]; then
  REDIS_URL=$SHOP_REDIS_URL; FSYNC="as SHOP_REDIS_URL has it"
elif [ "$FSYNC" = shared ]; then
  REDIS_URL=$(ensure_redis 0); FSYNC="the machine's Redis as found"
else
  BENCH_REDIS_PORT=${BENCH_REDIS_PORT:-$((PORT + 9))}
  REDIS_DIR=${BENCH_REDIS_DIR:+$BENCH_REDIS_DIR/shop-bench-redis}
  REDIS_DIR=${REDIS_DIR:-$PWD/$OUT/redis}
  rm -rf "$OUT/redis" "$REDIS_DIR" && mkdir -p "$OUT/redis" "$REDIS_DIR"
  redis-server deploy/redis.conf --daemonize yes --bind 127.0.0.1 --port "$BENCH_REDIS_PORT" --dir "$REDIS_DIR" \
    --save "" --appendfsync "$FSYNC" --logfile "$PWD/$OUT/redis/redis.log" >/dev/null
  wait_port "$BENCH_REDIS_PORT" || { echo "bench: redis-server on $BENCH_REDIS_PORT did not start" >&2; exit 1; }
  REDIS_URL=redis://127.0.0.1:$BENCH_REDIS_PORT/0; OWN_REDIS=1; FSYNC="its own, deploy/redis.conf with appendfsync $FSYNC${BENCH_REDIS_DIR:+, its AOF in $BENCH_REDIS_DIR}"
fi
PG_ADMIN_URL=$(ensure_postgres postgres)
[ -n "$REDIS_URL" ] && [ -n "$PG_ADMIN_URL" ] || { echo "bench: need Redis and PostgreSQL (see make run)" >&2; exit 1; }
DB_URL=${PG_ADMIN_URL/\/postgres\?/\/shop_bench?}
# redis://HOST:PORT/DB
rhostport=${REDIS_URL#redis://}; rhostport=${rhostport%%/*}
RHOST=${rhostport%:*}; RPORT=${rhostport##*:}
RDB=${REDIS_URL##*/}; [[ $RDB =~ ^[0-9]+$ ]] || RDB=0
rcli() { redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" "$@"; }

# Redis's own clock on a window (redis_window_start, then
# redis_window_end RUN PHASE FROM TO): its slow log at 1 ms over the
# window, with INFO commandstats around it; the slow entries counted are
# those of the attack's seconds FROM..TO (a loadtest's shoppers' set-up,
# argon2 on both cores, is left out; the few hundred script calls of its
# sign-ups stay in the count of calls). Redis times each command by the
# wall clock from its start to its end, so a script of ~130 µs of work that took
# 5 ms had Redis's one thread descheduled meanwhile, waiting for a core;
# and so did an O(1) command that took over 1 ms. Appends to
# redis-tail.tsv: run, phase, the window's script calls (EVALSHA), their
# mean µs in Redis, how many of them took over 1 ms and over 10 ms of
# Redis's own time, the longest (ms), then the other commands over 1 ms
# and the longest of them (ms); each slow entry, "command µs", to
# slowlog-RUN-PHASE.txt. On a shared Redis other clients' slow commands
# count too. The settings are restored after each window and on exit.
SLOWLOG_SAVED=
redis_window_start() {
  [ -n "$SLOWLOG_SAVED" ] ||
    SLOWLOG_SAVED="$(rcli config get slowlog-log-slower-than | tail -1) $(rcli config get slowlog-max-len | tail -1)"
  rcli config set slowlog-log-slower-than 1000 >/dev/null
  rcli config set slowlog-max-len 100000 >/dev/null
  rcli slowlog reset >/dev/null
  cmdstats >"$OUT/tail-cmdstats-before.txt"
}
redis_window_restore() {
  [ -n "$SLOWLOG_SAVED" ] || return 0
  local saved; read -r -a saved <<<"$SLOWLOG_SAVED"
  rcli config set slowlog-log-slower-than "${saved[0]}" >/dev/null || true
  rcli config set slowlog-max-len "${saved[1]}" >/dev/null || true
  rcli slowlog reset >/dev/null || true
}
redis_window_end() {
  local f="$OUT/slowlog-$1-$2.txt"
  cmdstats >"$OUT/tail-cmdstats-after.txt"
  # --json: [[id,time,µs,["COMMAND",args...],client,name],...]; only the
  # entries of the attack's own seconds (FROM..TO, epoch seconds).
  rcli --json slowlog get 100000 | grep -o '\[[0-9]*,[0-9]*,[0-9]*,\["[^"]*"' |
    awk -F'[],["]+' -v from="${3:-0}" -v to="${4:-9999999999}" '$3 >= int(from) && $3 <= int(to) {print tolower($5), $4}' >"$f" || true
  redis_window_restore
  awk -v run="$1" -v ph="$2" '
    FILENAME ~ /before/ {c[$1] = $2; u[$1] = $3; next}
    FILENAME ~ /after/ {if ($1 == "evalsha") {calls = $2 - c[$1]; usec = $3 - u[$1]}; next}
    $1 == "evalsha" {s1++; if ($2 > 10000) s10++; if ($2 > smax) smax = $2; next}
    {o++; if ($2 > omax) omax = $2}
    END {
      if (calls <= 0) exit
      printf "%s\t%s\t%d\t%.1f\t%d\t%d\t%.2f\t%d\t%.2f\n", run, ph, calls, usec / calls,
        s1, s10, smax / 1000, o, omax / 1000
    }' "$OUT/tail-cmdstats-before.txt" "$OUT/tail-cmdstats-after.txt" "$f" >>"$OUT/redis-tail.tsv"
}
mkdir -p "$OUT" bin
rm -f "$OUT"/*.tsv "$OUT"/cpu-samples.txt "$OUT"/loadtest-*.json "$OUT"/redis-benchmark-*.csv "$OUT"/get-*.json "$OUT"/wrk-*.txt "$OUT"/slowlog-*.txt
server_pid=
writer_pid=
sampler_pid=
cleanup() {
  [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
  redis_window_restore
  if [ -n "$writer_pid" ] && kill -0 "$writer_pid" 2>/dev/null; then
    kill "$writer_pid"; wait "$writer_pid" 2>/dev/null || true
  fi
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$OWN_REDIS" ]; then
    rcli shutdown nosave >/dev/null 2>&1 || true; OWN_REDIS=
    [ -z "${BENCH_REDIS_DIR:-}" ] || rm -rf "$REDIS_DIR"
  else
    # Every key this run wrote starts with its prefix (server and script).
    rcli --scan --pattern "${PREFIX}*" | xargs -r -n 500 redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" unlink >/dev/null
  fi
  PGOPTIONS='-c client_min_messages=warning' psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_bench' >/dev/null || true
}
trap cleanup EXIT


load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(load)
# Time the hypervisor ran something else on our cores (/proc/stat's
# steal), in core-seconds: a busy host slows every figure of a run.
TICKS=$(getconf CLK_TCK)
steal() { awk -v t="$TICKS" '/^cpu / {printf "%.1f", $9 / t}' /proc/stat; }
STEAL_START=$(steal)
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $LOAD_START"
echo "== Redis: $FSYNC"
echo "== $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3), $(psql -V | cut -d' ' -f3-)${HAVE_WRK:+, $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)}"
[ -n "$HAVE_WRK" ] || echo "== wrk not installed: purchases, their p99 at half rate and the product reads are measured with shop loadtest only (apt-get install wrk adds the second client)"

go build -o bin/shop ./cmd/shop
PGOPTIONS='-c client_min_messages=warning' psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_bench' >/dev/null
SHOP_DATABASE_URL=$DB_URL bin/shop migrate --create-db >/dev/null
SHOP_DATABASE_URL=$DB_URL bin/shop user add --email "$ADMIN_EMAIL" --password "$ADMIN_PASSWORD" --role admin >/dev/null

pprof_args=()
[ "${BENCH_PROFILE:-}" = 1 ] && pprof_args=(--pprof-addr "127.0.0.1:$((PORT + 1))")
SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d " \n")
# shellcheck disable=SC2086 # BENCH_SERVER_ENV is a list of NAME=VALUE words
env ${BENCH_SERVER_ENV:-} SHOP_JWT_SECRET=$SECRET SHOP_ADDR=127.0.0.1:$PORT SHOP_REDIS_URL=$REDIS_URL SHOP_DATABASE_URL=$DB_URL \
  SHOP_KEY_PREFIX=$PREFIX SHOP_RATE_LIMIT=100000/10s SHOP_TRUSTED_PROXIES=127.0.0.1 SHOP_LOG_LEVEL=${BENCH_LOG_LEVEL:-info} \
  bin/shop serve "${pprof_args[@]}" ${BENCH_SERVER_ARGS:-} ${BENCH_WRITER_NICE:+--writer=false} >"$OUT/server.log" 2>&1 &
server_pid=$!
# BENCH_WRITER_NICE=N: the order writer in a process of its own
# (`shop writer`) at nice N, the server without one: on shared cores the
# purchases then go before the writer's batches. Its CPU counts as the
# server's in the accounting.
writer_pid=
if [ -n "${BENCH_WRITER_NICE:-}" ]; then
  SHOP_JWT_SECRET=$SECRET SHOP_REDIS_URL=$REDIS_URL SHOP_DATABASE_URL=$DB_URL SHOP_KEY_PREFIX=$PREFIX SHOP_LOG_LEVEL=${BENCH_LOG_LEVEL:-info} \
    nice -n "$BENCH_WRITER_NICE" bin/shop writer >"$OUT/writer.log" 2>&1 &
  writer_pid=$!
fi
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

# Where the two cores go: a sampler writes, every second, the clock ticks
# used so far by each shop, wrk, redis-server and postgres process and by
# the whole machine (cpu-samples.txt); each measured phase notes its
# window (phases.tsv: run, phase, requests/s, start, end, epoch seconds);
# cpu_report divides each kind's ticks over a window by its length: cores
# busy, and core-µs per request at the phase's rate. Kinds: the server
# (its pid), the client (any other shop or wrk process: the load
# generator), Redis, PostgreSQL (all their processes), other (the rest of
# the machine's busy time: the kernel's own threads, the sampler) and
# idle.
cpu_sampler() {
  # A process may exit between the glob and its read: nothing here stops
  # the sampler.
  set +e +o pipefail
  while :; do
    {
      echo "T $(date +%s.%N)"
      head -1 /proc/stat | awk '{print "M", $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}'
      # /proc/PID/stat: pid (comm) state ... utime(14) stime(15); cat goes
      # on past a process that exits meanwhile.
      cat /proc/[0-9]*/stat 2>/dev/null |
        awk '{c = $2; gsub(/[()]/, "", c); if (c ~ /^(shop|wrk|redis-server|postgres)$/) print "P", $1, c, $14 + $15}' >"$OUT/cpu-pids.tmp"
      cat "$OUT/cpu-pids.tmp"
      # Each thread's time runnable but waiting for a core (schedstat's
      # second field, ns), summed per process: "W pid ns".
      awk '{printf "/proc/%s/task/*/schedstat ", $2}' "$OUT/cpu-pids.tmp" | xargs -r sh -c 'grep -H . $@ 2>/dev/null' _ |
        awk -F'[/: ]' '{w[$3] += $(NF - 1)} END {for (p in w) print "W", p, w[p]}'
    } >>"$OUT/cpu-samples.txt"
    sleep 1
  done
}
now() { date +%s.%N; }
# phase RUN NAME RATE START END: one measured window.
phase() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT/phases.tsv"; }
# inner_phase RUN NAME RATE START END: the window less a second at each
# end (the client's start and its last answers).
inner_phase() {
  phase "$1" "$2" "$3" "$(awk -v a="$4" 'BEGIN {printf "%.3f", a + 1}')" "$(awk -v a="$5" 'BEGIN {printf "%.3f", a - 1}')"
}
# attack_window START FILE: "FROM TO", epoch seconds, of the attack of a
# loadtest started at START: without the shoppers' set-up (setup_seconds)
# or the drain and checks after it. Nothing for a loadtest that wrote no
# report (it failed).
attack_window() {
  local setup secs
  setup=$(json_first setup_seconds "$2") || true; secs=$(json_first seconds "$2") || true
  [ -n "$secs" ] || return 0
  awk -v a="$1" -v b="${setup:-0}" -v c="$secs" 'BEGIN {printf "%.3f %.3f\n", a + b, a + b + c}'
}
# attack_phase RUN NAME START FILE RATEFIELD: a loadtest's attack window
# as a phase, less a second at each end; none without a report.
attack_phase() {
  local w; read -r -a w <<<"$(attack_window "$3" "$4")"
  [ ${#w[@]} = 2 ] || return 0
  inner_phase "$1" "$2" "$(json_field "$5" "$4")" "${w[0]}" "${w[1]}"
}
# Redis's own account of run 1's purchase attack (with its shoppers'
# set-up and the writer's drain): INFO commandstats before and after
# (cumulative, so nothing is reset on a shared Redis); per purchase, each
# command's calls and µs (redis-commands.txt). A command a script calls is
# counted under its own name and inside the script's EVALSHA µs too.
cmdstats() { rcli info commandstats | tr -d '\r' | awk -F'[:,=]' '/^cmdstat_/ {sub(/^cmdstat_/, "", $1); print $1, $3, $5}'; }
redis_per_purchase() {
  [ -n "$1" ] && [ "$1" -gt 0 ] || return 0
  awk -v n="$1" 'FNR == NR {c[$1] = $2; u[$1] = $3; next}
    {dc = $2 - c[$1]; du = $3 - u[$1]; if (dc > 0) printf "%-22s %8.3f %8.2f\n", $1, dc / n, du / n}' \
    "$OUT/cmdstats-before.txt" "$OUT/cmdstats-after.txt" | sort -k3,3gr >"$OUT/redis-commands.txt"
}
# whole N: N rounded, or N as it is when it is not a number (n/a).
whole() { awk -v v="$1" 'BEGIN {if (v ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) printf "%.0f", v; else printf "%s", v}'; }
json_first() { grep -o "\"$1\": [-0-9.a-z]*" "$2" | head -1 | awk '{print $2}' | tr -d ,; }
# cpu_report: per phase and run, cores used by each kind and core-µs per
# request (cpu.tsv: run, phase, requests/s, seconds, server, client,
# redis, postgres, other, idle, in cores; then the time the server's,
# the client's, Redis's and PostgreSQL's threads were runnable but
# waiting for a core, in seconds per second).
cpu_report() {
  [ -s "$OUT/cpu-samples.txt" ] && [ -s "$OUT/phases.tsv" ] || return 0
  awk -v ticks="$TICKS" -v server="$1" -v writer="${2:-}" '
    FNR == NR {n++; run[n] = $1; name[n] = $2; rate[n] = $3; from[n] = $4; to[n] = $5; next}
    $1 == "T" {s++; t[s] = $2; next}
    $1 == "M" {busy[s] = $2; total[s] = $3; next}
    $1 == "P" {k = ($2 == server || $2 == writer) ? "server" : ($3 == "shop" || $3 == "wrk") ? "client" : ($3 == "redis-server") ? "redis" : "postgres"
      kind[$2] = k; tk[s, $2] = $4; next}
    $1 == "W" {wt[s, $2] = $3}
    END {
      for (i = 1; i <= n; i++) {
        a = 0; b = 0
        for (j = 1; j <= s; j++) { if (!a && t[j] >= from[i]) a = j; if (t[j] <= to[i]) b = j }
        if (!a || b <= a) continue
        secs = t[b] - t[a]; split("", sum); split("", wait)
        for (p in kind) if ((b, p) in tk) sum[kind[p]] += tk[b, p] - (((a, p) in tk) ? tk[a, p] : 0)
        for (p in kind) if ((b, p) in wt) wait[kind[p]] += wt[b, p] - (((a, p) in wt) ? wt[a, p] : 0)
        known = sum["server"] + sum["client"] + sum["redis"] + sum["postgres"]
        printf "%s\t%s\t%s\t%.1f", run[i], name[i], rate[i], secs
        printf "\t%.3f\t%.3f\t%.3f\t%.3f", sum["server"] / ticks / secs, sum["client"] / ticks / secs, sum["redis"] / ticks / secs, sum["postgres"] / ticks / secs
        printf "\t%.3f\t%.3f", (busy[b] - busy[a] - known) / ticks / secs, ((total[b] - total[a]) - (busy[b] - busy[a])) / ticks / secs
        printf "\t%.3f\t%.3f\t%.3f\t%.3f\n", wait["server"] / 1e9 / secs, wait["client"] / 1e9 / secs, wait["redis"] / 1e9 / secs, wait["postgres"] / 1e9 / secs
      }
    }' "$OUT/phases.tsv" "$OUT/cpu-samples.txt" >"$OUT/cpu.tsv"
}

loadtest_args=(--target "http://127.0.0.1:$PORT" --admin-email "$ADMIN_EMAIL" --admin-password "$ADMIN_PASSWORD"
  --users "$USERS" --units 1000000 --per-user-limit 0 --connections "$CONNS" --forwarded-for --json)
# The load generator's cores (GOMAXPROCS): 1, like the one-threaded
# redis-benchmark and wrk -t1; plain_client sets 0 (all) for its runs.
LT_PROCS=1

# profile_attack FILE SECONDS: the server's CPU profile of SECONDS of the
# attack that is starting, taken once its purchases have begun (the
# reserve script's call count moves) and BENCH_PROFILE_DELAY (2 s) more
# have passed: the shoppers' set-up before it (200 sign-ups and logins,
# argon2 each) takes 5 to 13 s by the host's speed, and a fixed delay
# profiled the set-up on a slow one.
profile_attack() {
  local calls; calls=$(reserve_calls)
  for _ in $(seq 1 600); do
    [ "$(reserve_calls)" != "$calls" ] && break
    sleep 0.1
  done
  sleep "${BENCH_PROFILE_DELAY:-2}"
  curl -sf -o "$1" "http://127.0.0.1:$((PORT + 1))/debug/pprof/profile?seconds=$2"
}
reserve_calls() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk '/^shop_reserve_script_seconds_count/ {print $NF}'; }

# purchases RUN: the HTTP attack, then the bare scripts (reserve.lua,
# then the minimal purchase: scripts/bench-minimal.lua); appends to
# purchases.tsv: run, attempts/s, p50, p99, ok, reserve.lua ops/s, ratio,
# sku, minimal script ops/s, ratio.
purchases() {
  local i=$1 lt="$OUT/loadtest-$1.json" rb="$OUT/redis-benchmark-$1.csv" rm="$OUT/redis-benchmark-minimal-$1.csv"
  if [ "$i" = 1 ] && [ "${BENCH_PROFILE:-}" = 1 ]; then
    # Profile the middle of the attack, after the shoppers are set up.
    profile_attack "$OUT/cpu.pprof" 10 &
  fi
  local prof=()
  [ "$i" = 1 ] && [ -n "${BENCH_LOADTEST_PROFILE:-}" ] && prof=(--cpuprofile "$OUT/loadtest-cpu.pprof")
  aof_settle
  local start rw; start=$(now); rw=$(aof_rewrites)
  [ "$i" = 1 ] && cmdstats >"$OUT/cmdstats-before.txt"
  bin/shop loadtest "${loadtest_args[@]}" --procs "$LT_PROCS" --rate 0 --duration "$DURATION" "${prof[@]}" >"$lt" ||
    echo "bench: loadtest run $i reported a failure (see $lt)" >&2
  attack_phase "$i" purchases "$start" "$lt" attempts_per_sec
  rewrites_since "$rw" purchases "$i"
  [ "$i" = 1 ] && cmdstats >"$OUT/cmdstats-after.txt" && redis_per_purchase "$(json_first requests "$lt")"
  rb_reset
  local bstart; bstart=$(now)
  redis-benchmark -h "$RHOST" -p "$RPORT" --dbnum "$RDB" -c "$RB_CLIENTS" -n "$RB_REQUESTS" -r 1000000000 --csv \
    EVALSHA "$SHA" 9 "${RBP}orders" "${RBP}order:__rand_int__" "${RBP}orders:pending:{__rand_int__}" \
    "${RBP}idem:{__rand_int__}:__rand_int__" "${RBP}nocart" "${RBP}orders:due" "${RBP}sale:{rb}" "${RBP}sale:{rb}:buyers" \
    "${RBP}sale:{rb}:room:passes" __rand_int__ __rand_int__ 604800000 86400000 1 0 900000 0 1 rb 1 "${RBP}sale:{rb}:changed" 0 \
    "" "" >"$rb"
  # The bare script's window too: whatever else used the cores meanwhile
  # (the client here is redis-benchmark, a process of none of the kinds:
  # it shows as other).
  inner_phase "$i" bare "$(awk -F'","' 'NR==2 {print $2}' "$rb")" "$bstart" "$(now)"
  # The bare script's keys (200k status hashes with a week's TTL) go now.
  rcli --scan --pattern "${RBP}*" | xargs -r -n 500 redis-cli -h "$RHOST" -p "$RPORT" -n "$RDB" unlink >/dev/null
  # The minimal purchase (GET, HGET, DECRBY, HINCRBY, XADD) on a stock
  # that never runs out, random buyers: the floor of any purchase script.
  local msha; msha=$(rcli SCRIPT LOAD "$(cat scripts/bench-minimal.lua)")
  rcli set "${RBP}min:stock" 1000000000000 >/dev/null
  bstart=$(now)
  redis-benchmark -h "$RHOST" -p "$RPORT" --dbnum "$RDB" -c "$RB_CLIENTS" -n "$RB_REQUESTS" -r 1000000000 --csv \
    EVALSHA "$msha" 3 "${RBP}min:stock" "${RBP}min:buyers" "${RBP}min:orders" __rand_int__ 1 >"$rm"
  inner_phase "$i" bare-minimal "$(awk -F'","' 'NR==2 {print $2}' "$rm")" "$bstart" "$(now)"
  rcli unlink "${RBP}min:stock" "${RBP}min:buyers" "${RBP}min:orders" >/dev/null
  local http script minimal
  http=$(json_field attempts_per_sec "$lt"); script=$(awk -F'","' 'NR==2 {print $2}' "$rb")
  minimal=$(awk -F'","' 'NR==2 {print $2}' "$rm")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$http" "$(json_field p50 "$lt")" "$(json_field p99 "$lt")" \
    "$(json_field ok "$lt")" "$script" "$(ratio "$http" "$script")" "$(json_string sku "$lt")" \
    "$minimal" "$(ratio "$http" "$minimal")" >>"$OUT/purchases.tsv"
}

# fixed_rate RUN RATE FILE [PHASE]: purchases at RATE/s, same connections, 15 s;
# appends run, rate, attempts/s, p50, p90, p99, max, ok to FILE. A PHASE
# of half or half-* also takes the server's and Redis's view of the
# window (server_view into server.tsv, or server-PHASE.tsv).
fixed_rate() {
  local rt="$OUT/loadtest-rate-$1-$2.json"
  if [ "$1" = 1 ] && [ "${4:-}" = half ] && [ "${BENCH_PROFILE:-}" = 1 ]; then
    # The half-rate attack's own profile: what a purchase costs when the
    # batches (pipeliner, writer) are smaller.
    profile_attack "$OUT/cpu-half.pprof" 8 &
  fi
  aof_settle
  local start rw; start=$(now); rw=$(aof_rewrites)
  local viewed=; case ${4:-} in half | half-*) viewed=1 ;; esac
  if [ -n "$viewed" ]; then server_snapshot >"$OUT/server-before.txt"; redis_window_start; fi
  bin/shop loadtest "${loadtest_args[@]}" --procs "$LT_PROCS" --rate "$2" --duration 15s >"$rt" ||
    echo "bench: the loadtest at $2/s reported a failure (see $rt)" >&2
  if [ -n "$viewed" ]; then
    local w; read -r -a w <<<"$(attack_window "$start" "$rt")"
    redis_window_end "$1" "$4" "${w[0]:-0}" "${w[1]:-9999999999}"
    server_snapshot >"$OUT/server-after.txt"
    local sv="$OUT/server.tsv"; [ "$4" = half ] || sv="$OUT/server-$4.tsv"
    server_view "$1" "$(json_first requests "$rt")" >>"$sv"
  fi
  attack_phase "$1" "${4:-rate-$2}" "$start" "$rt" attempts_per_sec
  rewrites_since "$rw" "${4:-rate-$2}" "$1"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(json_field attempts_per_sec "$rt")" "$(json_field p50 "$rt")" \
    "$(json_field p90 "$rt")" "$(json_field p99 "$rt")" "$(json_field max "$rt")" "$(json_field ok "$rt")" >>"$3"
}

# The server's own account of a window, to split a purchase's latency
# into the time inside the server (from the request read to the answer
# written: its histogram) and the rest (socket queues, the client):
# server_snapshot prints the purchase route's latency buckets, the
# writer's batch sizes and PostgreSQL's commits so far; server_view RUN
# REQUESTS diffs the two snapshots around the half-rate attack (with its
# shoppers' set-up) into a line: run, the server's p50, p90, p99 (ms,
# interpolated within the histogram's buckets), the share of purchases
# over 10 ms inside the server, orders per writer batch, PostgreSQL
# commits per purchase, and the p50 and p99 of the purchase's one script
# call (shop_reserve_script_seconds: queued, sent, run, answered).
server_snapshot() {
  date +%s.%N
  curl -sf "http://127.0.0.1:$PORT/metrics" | awk '
    function le() { match($0, /le="[^"]*"/); return substr($0, RSTART + 4, RLENGTH - 5) }
    /^shop_http_request_duration_seconds_bucket\{/ && /method="POST"/ && /route="[^"]*purchase"/ {print "B", le(), $NF}
    /^shop_reserve_script_seconds_bucket\{/ {print "S", le(), $NF}
    /^shop_order_writer_batch_size_(count|sum)/ {sub(/\{.*\}/, "", $1); print "W", $1, $NF}' || true
  psql "$DB_URL" -tAc "SELECT 'C', xact_commit FROM pg_stat_database WHERE datname = current_database()" -F' ' 2>/dev/null || true
}
server_view() {
  awk -v run="$1" -v n="${2:-0}" '
    FNR == 1 {f++; next}
    $1 == "B" || $1 == "S" {h[f, $1, $2] = $3; if ($2 != "+Inf") les[$1, $2] = $2 + 0; next}
    $1 == "W" {w[f, $2] = $3; next}
    $1 == "C" {c[f] = $2}
    # q of histogram k over the window, in ms, interpolated within its bucket.
    function pct(k, q,    m, e, i, key, total, want, prev, lo, cnt, v) {
      m = 0; for (key in les) { split(key, e, SUBSEP); if (e[1] == k) edge[++m] = les[key] }
      asort(edge); total = h[2, k, "+Inf"] - h[1, k, "+Inf"]
      if (total <= 0) return "n/a"
      want = q * total; prev = 0; lo = 0
      for (i = 1; i <= m; i++) {
        key = sprintf("%g", edge[i]); cnt = h[2, k, key] - h[1, k, key]
        if (cnt >= want) { v = sprintf("%.2f", 1000 * (lo + (edge[i] - lo) * (want - prev) / (cnt > prev ? cnt - prev : 1))); delete edge; return v }
        prev = cnt; lo = edge[i]
      }
      delete edge; return "n/a"
    }
    END {
      total = h[2, "B", "+Inf"] - h[1, "B", "+Inf"]; if (total <= 0) exit
      batches = w[2, "shop_order_writer_batch_size_count"] - w[1, "shop_order_writer_batch_size_count"]
      entries = w[2, "shop_order_writer_batch_size_sum"] - w[1, "shop_order_writer_batch_size_sum"]
      printf "%s\t%s\t%s\t%s\t%.4f\t%.1f\t%.2f\t%s\t%s\n", run, pct("B", 0.5), pct("B", 0.9), pct("B", 0.99),
        (total - (h[2, "B", "0.01"] - h[1, "B", "0.01"])) / total,
        (batches > 0 ? entries / batches : 0), (n > 0 ? (c[2] - c[1]) / n : 0), pct("S", 0.5), pct("S", 0.99)
    }' "$OUT/server-before.txt" "$OUT/server-after.txt"
}

# get_load RUN NAME PATH: `shop loadtest get`; prints requests/s and p99.
get_load() {
  local f="$OUT/get-$1-$2.json"
  local start; start=$(now)
  bin/shop loadtest get --target "http://127.0.0.1:$PORT" --path "$3" --connections "$CONNS" --duration "$READ_DURATION" \
    --addresses "$USERS" --procs 1 --json >"$f" || echo "bench: loadtest get $3 reported a failure (see $f)" >&2
  attack_phase "$1" "$2-loadtest" "$start" "$f" requests_per_sec
  echo "$(json_field requests_per_sec "$f") $(json_field p99 "$f")"
}

# aof_settle: on the bench's own Redis, rewrite the AOF now and wait for
# the rewrite to end (BGREWRITEAOF), so that the next phase starts with a
# fresh AOF and Redis's automatic rewrite (from 1gb, deploy/redis.conf)
# does not fall in its seconds: a rewrite forks and writes the whole
# dataset while every fsync waits, and took one phase's p99 to 434 ms.
# Operators schedule rewrites outside a sale the same way
# (docs/operations.md). rewrites_since N PHASE RUN notes in rewrites.tsv
# a phase that saw one all the same (N: aof_rewrites before it).
aof_rewrites() { rcli info persistence | tr -d '\r' | awk -F: '$1 == "aof_rewrites" {print $2}'; }
aof_settle() {
  [ -n "$OWN_REDIS" ] || return 0
  rcli bgrewriteaof >/dev/null 2>&1 || true
  local info
  for _ in $(seq 1 1200); do
    info=$(rcli info persistence | tr -d '\r')
    grep -q '^aof_rewrite_in_progress:0' <<<"$info" && grep -q '^aof_rewrite_scheduled:0' <<<"$info" && return 0
    sleep 0.1
  done
  echo "bench: the AOF rewrite before a phase did not end in 120 s" >&2
}
rewrites_since() {
  [ -n "$OWN_REDIS" ] || return 0
  local n; n=$(( $(aof_rewrites) - $1 ))
  [ "$n" -le 0 ] || { printf '%s\t%s\t%s\n' "$3" "$2" "$n" >>"$OUT/rewrites.tsv"; echo "   (an automatic AOF rewrite fell in $2)"; }
}

# healthz_at RUN NAME RATE: GET /healthz at RATE/s for 15 s from the
# purchases' client (`shop loadtest get`, LT_PROCS cores), the same
# connections and addresses: the server's floor at a purchase phase's
# rate; prints its p99 (ms).
healthz_at() {
  local f="$OUT/get-$1-$2.json" start; start=$(now)
  bin/shop loadtest get --target "http://127.0.0.1:$PORT" --path /healthz --rate "$3" --connections "$CONNS" --duration 15s \
    --addresses "$USERS" --procs "$LT_PROCS" --json >"$f" || echo "bench: /healthz at $3/s reported a failure (see $f)" >&2
  attack_phase "$1" "$2" "$start" "$f" requests_per_sec
  json_field p99 "$f"
}

# plain_client RUN: the purchases as an outside Go client sends them:
# `shop loadtest` at the default GOMAXPROCS (--procs 0: vegeta's net/http
# client, one shared transport, on both cores, as a client on a host of
# its own would be), at full speed, then at half of that with the
# server's and Redis's view of the window, then GET /healthz at that
# rate from the same client. Appends run, purchases/s, p99, the ratio to
# the minimal script, to reserve.lua, the half rate, its p50 and p99,
# /healthz's p99 at that rate and the two p99s' ratio to plain.tsv.
plain_client() {
  local i=$1 lt="$OUT/loadtest-plain-$1.json" LT_PROCS=0 start rw
  aof_settle
  start=$(now); rw=$(aof_rewrites)
  bin/shop loadtest "${loadtest_args[@]}" --procs 0 --rate 0 --duration "$DURATION" >"$lt" ||
    echo "bench: the plain client's loadtest run $i reported a failure (see $lt)" >&2
  attack_phase "$i" purchases-plain "$start" "$lt" attempts_per_sec
  rewrites_since "$rw" purchases-plain "$i"
  local http rate script minimal p50 p99 hz
  http=$(json_field attempts_per_sec "$lt"); rate=$(half "${http:-0}")
  script=$(awk -F'\t' -v r="$i" '$1 == r {print $6}' "$OUT/purchases.tsv")
  minimal=$(awk -F'\t' -v r="$i" '$1 == r {print $9}' "$OUT/purchases.tsv")
  if [ "$rate" -gt 0 ]; then
    fixed_rate "$i" "$rate" "$OUT/halfrate-plain.tsv" half-plain
    IFS=$'\t' read -r _ _ _ p50 _ p99 _ _ < <(tail -1 "$OUT/halfrate-plain.tsv")
    hz=$(healthz_at "$i" healthz-half-plain "$rate")
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "${http:-n/a}" "$(json_field p99 "$lt")" \
    "$(ratio "${http:-0}" "${minimal:-0}")" "$(ratio "${http:-0}" "${script:-0}")" "$rate" "${p50:-n/a}" "${p99:-n/a}" \
    "${hz:-n/a}" "$(ratio "${p99:-0}" "${hz:-0}")" >>"$OUT/plain.tsv"
}

# wrk_ms PERCENTILE FILE: that latency percentile of a wrk --latency report, in ms.
wrk_ms() {
  awk -v q="$1" '$1 == q {v=$2; if (v ~ /us$/) {sub(/us$/, "", v); v/=1000} else if (v ~ /ms$/) sub(/ms$/, "", v);
    else if (v ~ /s$/) {sub(/s$/, "", v); v*=1000}; print v}' "$2"
}

# wrk_load RUN NAME PATH: wrk, one thread (one core, like --procs 1), the
# same connections and X-Forwarded-For addresses; prints requests/s, p99 ms.
wrk_load() {
  local f="$OUT/wrk-$1-$2.txt" start end
  start=$(now)
  WRK_ADDRESSES=$USERS wrk -t1 -c "$CONNS" -d "$READ_DURATION" --timeout 10s --latency -s scripts/wrk-forwarded.lua \
    "http://127.0.0.1:$PORT$3" >"$f" 2>&1 || echo "bench: wrk $3 failed (see $f)" >&2
  end=$(now)
  inner_phase "$1" "$2-wrk" "$(awk '/^Requests\/sec:/ {print $2}' "$f")" "$start" "$end"
  if grep -q 'Non-2xx' "$f"; then echo "bench: wrk $3 had answers other than 2xx (see $f)" >&2; fi
  local rps p99
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
  p99=$(wrk_ms 99% "$f")
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

cpu_sampler &
sampler_pid=$!
# wrk_purchases RUN: purchases with wrk, the second client (one thread,
# the same connections and duration as `shop loadtest`): a product of its
# own with 10^6 units and no per-user limit, USERS shoppers registered
# and logged in through the API (X-Forwarded-For as the load test's), each
# request one unit with a fresh Idempotency-Key (scripts/wrk-purchase.lua).
# Then, once the writer has drained, the invariants: every 202 is a sold
# unit and sold == quantity - available (the admin stock report), with at
# most one unread answer per connection at the end, and `shop audit
# --lag-bound 0s` passes (Redis and PostgreSQL agree on every round, every
# order persisted, nothing dead), over both attacks: the full one and
# the one at half its rate. Appends run, purchases/s, p50, p99, accepted,
# ok, ratio to the same run's bare script, then the half rate, the
# purchases/s reached at it, its p50 and p99, and its requests over 1 ms
# behind their slot and the latest (ms) to purchases-wrk.tsv.
wrk_purchases() {
  local i=$1 f="$OUT/wrk-purchases-$1.txt" sku="wrkp-$1-$$" shoppers="$OUT/wrk-shoppers-$1.txt" base="http://127.0.0.1:$PORT/api/v1"
  local admin
  admin=$(curl -sf "$base/auth/login" -H 'Content-Type: application/json' -H 'X-Forwarded-For: 198.19.255.1' \
    -d "{\"email\":\"$ADMIN_EMAIL\",\"password\":\"$ADMIN_PASSWORD\"}" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p') || true
  [ -n "$admin" ] || { echo "bench: wrk purchases: admin login failed" >&2; return 0; }
  curl -sf -o /dev/null "$base/admin/products" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -H 'X-Forwarded-For: 198.19.255.1' -d "{\"sku\":\"$sku\",\"name\":\"wrk purchases\",\"category\":\"bench\",\"price_cents\":100}" &&
    curl -sf -o /dev/null -X PUT "$base/admin/products/$sku/stock" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
      -H 'X-Forwarded-For: 198.19.255.1' -d '{"quantity":1000000,"per_user_limit":0}' ||
    { echo "bench: wrk purchases: could not create $sku" >&2; return 0; }
  # Shopper k: register, log in, print "token address" (the address as
  # shop loadtest --forwarded-for gives shopper k).
  seq 1 "$USERS" | xargs -P 4 -I{} sh -c '
    k={}; addr="198.18.$((k / 256)).$((k % 256))"; email="wrk-$1-$2-$k@loadtest.invalid"
    curl -sf -o /dev/null "$3/auth/register" -H "Content-Type: application/json" -H "X-Forwarded-For: $addr" \
      -d "{\"email\":\"$email\",\"password\":\"wrk-shopper-password\"}" &&
    t=$(curl -sf "$3/auth/login" -H "Content-Type: application/json" -H "X-Forwarded-For: $addr" \
      -d "{\"email\":\"$email\",\"password\":\"wrk-shopper-password\",\"device\":\"wrk\"}" |
      sed -n "s/.*\"access_token\":\"\([^\"]*\)\".*/\1/p") && [ -n "$t" ] && echo "$t $addr"' _ "$i" "$$" "$base" >"$shoppers" || true
  [ "$(wc -l <"$shoppers")" = "$USERS" ] || { echo "bench: wrk purchases: only $(wc -l <"$shoppers") of $USERS shoppers logged in" >&2; return 0; }
  local start end
  start=$(now)
  WRK_SHOPPERS=$shoppers WRK_SKU=$sku WRK_RUN="$i-$$" wrk -t1 -c "$CONNS" -d "$DURATION" --timeout 10s --latency \
    -s scripts/wrk-purchase.lua "http://127.0.0.1:$PORT" >"$f" 2>&1 || echo "bench: wrk purchases failed (see $f)" >&2
  end=$(now)
  local rps p50 p99 accepted timeouts
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
  inner_phase "$i" purchases-wrk "$rps" "$start" "$end"
  p50=$(wrk_ms 50% "$f"); p99=$(wrk_ms 99% "$f")
  # The same client, shoppers and product at a fixed rate of half its
  # maximum for 15 s (WRK_RATE paces it: scripts/wrk-purchase.lua): the
  # p99 target's second client, with Redis's own clock on the window.
  local hf="$OUT/wrk-half-$1.txt" hrate hrps= hp50= hp99= hlate= hlatemax=
  : >"$hf"
  hrate=$(half "${rps:-0}")
  if [ "$hrate" -gt 0 ]; then
    start=$(now); redis_window_start
    WRK_RATE=$hrate WRK_SHOPPERS=$shoppers WRK_SKU=$sku WRK_RUN="$i-$$-half" wrk -t1 -c "$CONNS" -d 15s --timeout 10s --latency \
      -s scripts/wrk-purchase.lua "http://127.0.0.1:$PORT" >"$hf" 2>&1 || echo "bench: wrk at half rate failed (see $hf)" >&2
    end=$(now); redis_window_end "$i" half-wrk "$start" "$end"
    hrps=$(awk '/^Requests\/sec:/ {print $2}' "$hf")
    inner_phase "$i" half-wrk "$hrps" "$start" "$end"
    hp50=$(wrk_ms 50% "$hf"); hp99=$(wrk_ms 99% "$hf")
    read -r hlate hlatemax < <(awk '$1 == "late" {print $2, $3}' "$hf") || true
  fi
  # Both attacks' answers: 202s and socket errors ("Socket errors: connect
  # C, read R, write W, timeout T": a request lost to any of them may
  # still have bought its unit, unanswered).
  accepted=$(cat "$f" "$hf" 2>/dev/null | awk '$1 == "status" && $2 == 202 {n += $3} END {print n + 0}')
  timeouts=$(cat "$f" "$hf" 2>/dev/null | awk '/^  Socket errors:/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}')
  # The writer drains, then the stock report and the audit must agree.
  local ok=false stock sold avail audit=1
  for _ in $(seq 1 60); do
    SHOP_JWT_SECRET=$SECRET SHOP_REDIS_URL=$REDIS_URL SHOP_DATABASE_URL=$DB_URL SHOP_KEY_PREFIX=$PREFIX \
      bin/shop audit --lag-bound 0s >"$OUT/wrk-audit-$i.json" 2>&1 && { audit=0; break; }
    sleep 1
  done
  stock=$(curl -sf "$base/admin/products/$sku/stock" -H "Authorization: Bearer $admin" -H 'X-Forwarded-For: 198.19.255.1') || true
  sold=$(sed -n 's/.*"sold":\([0-9]*\).*/\1/p' <<<"$stock"); avail=$(sed -n 's/.*"available":\([0-9]*\).*/\1/p' <<<"$stock")
  # wrk stops at the duration with a request in flight on each connection,
  # whose purchase the server may still make: up to CONNS units an attack
  # are sold without a 202 read (unknown outcomes, as a timeout's), and
  # one more per socket error.
  sold=${sold:-0}; avail=${avail:-0}
  local attacks=1; [ -s "$hf" ] && attacks=2
  if [ "$audit" = 0 ] && [ "$sold" -ge "$accepted" ] && [ "$sold" -le $((accepted + attacks * CONNS + timeouts)) ] &&
    [ $((1000000 - avail)) = "$sold" ]; then ok=true; else
    echo "bench: wrk purchases: accepted $accepted, sold $sold, available $avail, socket errors $timeouts, audit exit $audit (see $OUT/wrk-audit-$i.json)" >&2
  fi
  local script; script=$(awk -F'\t' -v r="$i" '$1 == r {print $6}' "$OUT/purchases.tsv")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "${rps:-n/a}" "${p50:-n/a}" "${p99:-n/a}" "$accepted" "$ok" \
    "$(ratio "${rps:-0}" "${script:-0}")" "$([ "$hrate" -gt 0 ] && echo "$hrate" || echo n/a)" "${hrps:-n/a}" "${hp50:-n/a}" "${hp99:-n/a}" "${hlate:-n/a}" "${hlatemax:-n/a}" \
    >>"$OUT/purchases-wrk.tsv"
}

echo
echo "== per run: purchases (shop loadtest, $CONNS connections, $DURATION) vs redis-benchmark -c $RB_CLIENTS (reserve.lua);"
echo "   purchases at half that rate; GET product vs GET /healthz ($READ_DURATION each, $CONNS connections)"
for i in $(seq 1 "$RUNS"); do
  echo "-- run $i, load $(load)"
  purchases "$i"
  IFS=$'\t' read -r _ http p50 p99 ok script r sku minimal rmin < <(tail -1 "$OUT/purchases.tsv")
  printf '   purchases %s/s (p50 %s ms, p99 %s ms, invariants ok: %s), bare script %s ops/s: ratio %s; minimal script %s ops/s: ratio %s\n' \
    "$http" "$p50" "$p99" "$ok" "$script" "$r" "$minimal" "$rmin"
  if [ "$(half "${http:-0}")" -gt 0 ]; then
    fixed_rate "$i" "$(half "$http")" "$OUT/halfrate.tsv" half
    IFS=$'\t' read -r _ rate got _ _ p99h _ okh < <(tail -1 "$OUT/halfrate.tsv")
    hz=$(healthz_at "$i" healthz-half "$rate")
    printf '%s\t%s\t%s\t%s\n' "$i" "$rate" "$hz" "$(ratio "${p99h:-0}" "${hz:-0}")" >>"$OUT/healthz-half.tsv"
    printf '   at %s/s (half): %s/s, p99 %s ms (invariants ok: %s); GET /healthz at that rate: p99 %s ms\n' "$rate" "$got" "$p99h" "$okh" "$hz"
    if [ -s "$OUT/server.tsv" ] && [ "$(tail -1 "$OUT/server.tsv" | cut -f1)" = "$i" ]; then
      IFS=$'\t' read -r _ s50 _ s99 sover sbatch scommit r50 r99 < <(tail -1 "$OUT/server.tsv")
      printf '      inside the server: p50 %s ms, p99 %s ms, %s over 10 ms; its script call p50 %s ms, p99 %s ms\n' \
        "$s50" "$s99" "$sover" "$r50" "$r99"
      printf '      meanwhile %s orders per writer batch, %s PostgreSQL commits per purchase\n' "$sbatch" "$scommit"
    fi
  fi
  reads "$i" "$sku"
  if [ -n "$HAVE_WRK" ]; then
    wrk_purchases "$i"
    IFS=$'\t' read -r _ wr wp50 wp99 wacc wok wratio whr whg wh50 wh99 wlate wlatemax < <(awk -F'\t' -v r="$i" '$1 == r' "$OUT/purchases-wrk.tsv" 2>/dev/null || echo) || true
    printf '   wrk      purchases %s/s (p50 %s ms, p99 %s ms, %s accepted, invariants ok: %s): ratio to the bare script %s\n' \
      "${wr:-n/a}" "${wp50:-n/a}" "${wp99:-n/a}" "${wacc:-n/a}" "${wok:-n/a}" "${wratio:-n/a}"
    printf '   wrk      at %s/s (half): %s/s, p50 %s ms, p99 %s ms (%s requests over 1 ms behind their slot, the latest by %s ms)\n' \
      "${whr:-n/a}" "${whg:-n/a}" "${wh50:-n/a}" "${wh99:-n/a}" "${wlate:-n/a}" "${wlatemax:-n/a}"
  fi
  plain_client "$i"
  IFS=$'\t' read -r _ pl pl99 plmin plres plrate pl50h pl99h plhz plratio < <(tail -1 "$OUT/plain.tsv")
  printf '   plain    purchases %s/s (p99 %s ms): ratio to the minimal script %s, to reserve.lua %s\n' "$pl" "$pl99" "$plmin" "$plres"
  printf '   plain    at %s/s (half): p50 %s ms, p99 %s ms; GET /healthz at that rate: p99 %s ms (ratio %s)\n' \
    "$plrate" "$pl50h" "$pl99h" "$plhz" "$plratio"
  if [ -s "$OUT/server-half-plain.tsv" ] && [ "$(tail -1 "$OUT/server-half-plain.tsv" | cut -f1)" = "$i" ]; then
    IFS=$'\t' read -r _ s50 _ s99 sover _ _ r50 r99 < <(tail -1 "$OUT/server-half-plain.tsv")
    printf '      inside the server: p50 %s ms, p99 %s ms, %s over 10 ms; its script call p50 %s ms, p99 %s ms\n' \
      "$s50" "$s99" "$sover" "$r50" "$r99"
  fi
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
if [ "${BENCH_PROFILE:-}" = 1 ] && [ -s "$OUT/cpu-half.pprof" ]; then
  echo; echo "== server CPU profile (8 s of the first half-rate attack): go tool pprof -top bin/shop $OUT/cpu-half.pprof"
  go tool pprof -top -nodecount=35 bin/shop "$OUT/cpu-half.pprof" 2>/dev/null | sed -n '1,45p'
fi

cpu_report "$server_pid" "$writer_pid"
kill "$sampler_pid" 2>/dev/null || true; sampler_pid=
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

if [ "${BENCH_SKIP_GO:-}" != 1 ]; then
  SHOP_TEST_REDIS_URL=${SHOP_TEST_REDIS_URL:-$(ensure_redis 1)}
  SHOP_TEST_DATABASE_URL=${SHOP_TEST_DATABASE_URL:-$PG_ADMIN_URL}
  export SHOP_TEST_REDIS_URL SHOP_TEST_DATABASE_URL
  echo; echo "== order writer: go test -run '^\$' -bench 'WriterDrain\$|WriterCopy\$' -benchtime ${WRITER_ORDERS}x -count $RUNS ./internal/order/writer"
  go test -run '^$' -bench 'WriterDrain$|WriterCopy$' -benchtime "${WRITER_ORDERS}x" -count "$RUNS" -timeout 30m ./internal/order/writer |
    tee "$OUT/writer.txt" | grep -E '^(Benchmark|ok|FAIL)'
  # orders/s of each run, by benchmark
  awk '/^BenchmarkWriter(Drain|Copy)/ {for (f = 1; f < NF; f++) if ($(f+1) == "orders/s") {
    split($1, n, "-"); sub(/^BenchmarkWriter/, "", n[1]); print n[1] "\t" $f}}' "$OUT/writer.txt" >"$OUT/writer.tsv"
  awk -F'\t' '$1 == "Drain" {print $2}' "$OUT/writer.tsv" >"$OUT/drain.tsv"
  awk -F'\t' '$1 == "Copy" {print $2}' "$OUT/writer.tsv" >"$OUT/copy.tsv"
fi

LOAD_END=$(load)
STOLEN=$(awk -v a="$STEAL_START" -v b="$(steal)" 'BEGIN {printf "%.1f", b - a}')
{
  echo
  echo "== the four ratios: medians of $RUNS run(s), each ratio measured within one run; load $LOAD_START at the start, $LOAD_END at the end;"
  echo "   $STOLEN core-seconds stolen by the host (steal) while the bench ran"
  printf '%-58s %14s %14s %9s %8s\n' "" "measured" "baseline" "ratio" target
  printf '%-58s %14s %14s %9s %8s\n' "HTTP purchases/s / bare reserve script (redis-benchmark -c $RB_CLIENTS)" \
    "$(median "$OUT/purchases.tsv" 2)" "$(median "$OUT/purchases.tsv" 6)" "$(median "$OUT/purchases.tsv" 7)" ">= 0.35"
  printf '%-58s %14s %14s %9s %8s\n' "  the same / bare minimal purchase script (bench-minimal.lua)" \
    "$(median "$OUT/purchases.tsv" 2)" "$(median "$OUT/purchases.tsv" 9)" "$(median "$OUT/purchases.tsv" 10)" ""
  if [ -s "$OUT/plain.tsv" ]; then
    printf '%-58s %14s %14s %9s %8s\n' "  plain client (shop loadtest --procs 0) / minimal script" \
      "$(median "$OUT/plain.tsv" 2)" "$(median "$OUT/purchases.tsv" 9)" "$(median "$OUT/plain.tsv" 4)" ">= 0.35"
    printf '%-58s %14s %14s %9s %8s\n' "  plain client / bare reserve script" \
      "$(median "$OUT/plain.tsv" 2)" "$(median "$OUT/purchases.tsv" 6)" "$(median "$OUT/plain.tsv" 5)" ""
  fi
  if [ -s "$OUT/purchases-wrk.tsv" ]; then
    printf '%-58s %14s %14s %9s %8s\n' "  the same, wrk -t1 as the client (invariants: $(cut -f6 "$OUT/purchases-wrk.tsv" | sort -u | tr '\n' ' '| sed 's/ $//'))" \
      "$(median "$OUT/purchases-wrk.tsv" 2)" "$(median "$OUT/purchases.tsv" 6)" "$(median "$OUT/purchases-wrk.tsv" 7)" ">= 0.35"
  fi
  printf '%-58s %14s %14s %9s %8s\n' "p99 ms of purchases at half the measured maximum" \
    "$(median "$OUT/halfrate.tsv" 6)" "at $(median "$OUT/halfrate.tsv" 2)/s" "" "<= 10"
  if [ -s "$OUT/healthz-half.tsv" ]; then
    printf '%-58s %14s %14s %9s %8s\n' "  GET /healthz's p99 ms at that rate; purchases' / its" \
      "$(median "$OUT/healthz-half.tsv" 3)" "" "$(median "$OUT/healthz-half.tsv" 4)" "<= 5"
  fi
  if [ -s "$OUT/plain.tsv" ]; then
    printf '%-58s %14s %14s %9s %8s\n' "  the same, plain client at half its own maximum" \
      "$(median "$OUT/plain.tsv" 8)" "at $(median "$OUT/plain.tsv" 6)/s" "" "<= 10"
    printf '%-58s %14s %14s %9s %8s\n' "  GET /healthz's p99 ms at that rate (plain); purchases' / its" \
      "$(median "$OUT/plain.tsv" 9)" "" "$(median "$OUT/plain.tsv" 10)" "<= 5"
  fi
  if [ -s "$OUT/server-half-plain.tsv" ]; then
    printf '  %-56s %14s %14s\n' "the plain client's inside the server: p50 / p99 ms" \
      "$(median "$OUT/server-half-plain.tsv" 2) / $(median "$OUT/server-half-plain.tsv" 4)" "$(median "$OUT/server-half-plain.tsv" 5) over 10 ms"
    printf '  %-56s %14s\n' "  its one script call: p50 / p99 ms" "$(median "$OUT/server-half-plain.tsv" 8) / $(median "$OUT/server-half-plain.tsv" 9)"
  fi
  if [ -s "$OUT/purchases-wrk.tsv" ]; then
    printf '%-58s %14s %14s %9s %8s\n' "  the same, wrk -t1 paced at half its own maximum" \
      "$(median "$OUT/purchases-wrk.tsv" 11)" "at $(median "$OUT/purchases-wrk.tsv" 8)/s" "" "<= 10"
  fi
  if [ -s "$OUT/server.tsv" ]; then
    printf '  %-56s %14s %14s\n' "shop loadtest's inside the server (its histogram): p50 / p99 ms" \
      "$(median "$OUT/server.tsv" 2) / $(median "$OUT/server.tsv" 4)" "$(median "$OUT/server.tsv" 5) over 10 ms"
    printf '  %-56s %14s\n' "  its one script call: p50 / p99 ms" "$(median "$OUT/server.tsv" 8) / $(median "$OUT/server.tsv" 9)"
    printf '  %-56s %14s %14s\n' "meanwhile: orders per writer batch, PostgreSQL commits per purchase" \
      "$(median "$OUT/server.tsv" 6)" "$(median "$OUT/server.tsv" 7)"
  fi
  if [ -s "$OUT/redis-tail.tsv" ]; then
    for ph in half half-plain half-wrk; do
      awk -F'\t' -v ph="$ph" '$2 == ph' "$OUT/redis-tail.tsv" >"$OUT/redis-tail-$ph.tsv"
      [ -s "$OUT/redis-tail-$ph.tsv" ] || continue
      printf '  %-56s %14s %14s\n' "Redis's own clock ($ph): script calls, mean µs of one" \
        "$(median "$OUT/redis-tail-$ph.tsv" 3)" "$(median "$OUT/redis-tail-$ph.tsv" 4)"
      printf '  %-56s %14s %14s\n' "  calls over 1 ms / over 10 ms; the longest, ms" \
        "$(median "$OUT/redis-tail-$ph.tsv" 5) / $(median "$OUT/redis-tail-$ph.tsv" 6)" "$(median "$OUT/redis-tail-$ph.tsv" 7)"
      printf '  %-56s %14s %14s\n' "  O(1) and other commands over 1 ms; the longest, ms" \
        "$(median "$OUT/redis-tail-$ph.tsv" 8)" "$(median "$OUT/redis-tail-$ph.tsv" 9)"
    done
  fi
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
  if [ -s "$OUT/cpu.tsv" ]; then
    PHASES="purchases purchases-plain purchases-wrk bare bare-minimal half healthz-half half-plain healthz-half-plain half-wrk"
    PHASES+=" product-loadtest healthz-loadtest product-wrk healthz-wrk"
    echo
    echo "== where the two cores go: cores busy per kind of process (medians of $RUNS run(s); in brackets, core-µs per request at the phase's rate)"
    printf '%-18s %10s %13s %13s %13s %13s %13s %7s\n' phase "req/s" server "client" redis postgres other idle
    for ph in $PHASES; do
      awk -F'\t' -v ph="$ph" '$2 == ph' "$OUT/cpu.tsv" >"$OUT/cpu-$ph.tsv"
      [ -s "$OUT/cpu-$ph.tsv" ] || continue
      awk -F'\t' 'BEGIN {OFS = "\t"} {r = $3 > 0 ? $3 : 0; o = $1 "\t" $3; for (c = 5; c <= 10; c++) o = o "\t" (r ? $c * 1e6 / r : "n/a"); print o}' \
        "$OUT/cpu-$ph.tsv" >"$OUT/cpuus-$ph.tsv"
      line=$(printf '%-18s %10s' "$ph" "$(median "$OUT/cpu-$ph.tsv" 3)")
      for c in 5 6 7 8 9; do
        line+=$(printf ' %6s (%4s)' "$(median "$OUT/cpu-$ph.tsv" $c)" "$(whole "$(median "$OUT/cpuus-$ph.tsv" $((c - 2)))")")
      done
      line+=$(printf ' %7s' "$(median "$OUT/cpu-$ph.tsv" 10)")
      echo "$line"
    done
    echo
    echo "== runnable but waiting for a core (schedstat; s per s, in brackets µs per request): where the tail comes from"
    printf '%-18s %10s %13s %13s %13s %13s\n' phase "req/s" server "client" redis postgres
    for ph in $PHASES; do
      [ -s "$OUT/cpu-$ph.tsv" ] || continue
      awk -F'\t' 'BEGIN {OFS = "\t"} {r = $3 > 0 ? $3 : 0; o = $1 "\t" $3; for (c = 11; c <= 14; c++) o = o "\t" (r ? $c * 1e6 / r : "n/a"); print o}' \
        "$OUT/cpu-$ph.tsv" >"$OUT/waitus-$ph.tsv"
      line=$(printf '%-18s %10s' "$ph" "$(median "$OUT/cpu-$ph.tsv" 3)")
      for c in 11 12 13 14; do
        line+=$(printf ' %6s (%4s)' "$(median "$OUT/cpu-$ph.tsv" $c)" "$(whole "$(median "$OUT/waitus-$ph.tsv" $((c - 8)))")")
      done
      echo "$line"
    done
  fi
  if [ -s "$OUT/redis-commands.txt" ]; then
    echo
    echo "== Redis's commands per purchase (run 1, INFO commandstats; a script's commands also count inside its EVALSHA)"
    printf '%-22s %8s %8s\n' command calls "µs"
    head -15 "$OUT/redis-commands.txt"
  fi
  if [ -s "$OUT/rewrites.tsv" ]; then
    echo "automatic AOF rewrites inside measured phases (run, phase, count): $(tr '\t\n' ' ;' <"$OUT/rewrites.tsv")"
  fi
  echo "per run: $OUT/purchases.tsv, halfrate.tsv, reads.tsv, writer.tsv, cpu.tsv; reports in $OUT/"
} | tee "$OUT/summary.txt"

if [ "${BENCH_SKIP_GO:-}" = 1 ] || [ "${BENCH_SKIP_HOT:-}" = 1 ]; then exit 0; fi
echo; echo "== hot paths: go test -run '^\$' -bench 'Reserve\$|Allow\$|VerifyToken\$|AuthenticatedRequest|GetProductCached\$|ProductJSON\$|ValidCode\$|ParseBatch\$|Purchase\$|GetProduct\$|Healthz\$' -benchtime 3s -benchmem"
go test -run '^$' -bench 'Reserve$|Allow$|VerifyToken$|AuthenticatedRequest|GetProductCached$|ProductJSON$|ValidCode$|ParseBatch$|Purchase$|GetProduct$|Healthz$' \
  -benchtime 3s -benchmem -timeout 10m ./internal/order ./internal/order/writer ./internal/inventory ./internal/shop/catalogtest ./internal/ratelimit ./internal/auth ./internal/onetrip ./internal/shop |
  grep -E '^(Benchmark|ok|FAIL)'

if [ "${BENCH_SKIP_GO:-}" = 1 ] || [ "${BENCH_SKIP_HOT:-}" = 1 ]; then exit 0; fi
echo; echo "== work per purchase (issue 47): go test -v -run '^\$' -bench PurchaseWork -benchtime 5000x -count $RUNS ./internal/shop (at 500/s, AOF always; Redis's commands, CPU and AOF bytes, the app's trips and CPU, per purchase)"
go test -v -run '^$' -bench 'PurchaseWork' -benchtime 5000x -count "$RUNS" -timeout 10m ./internal/shop |
  grep -vE '^(goos|goarch|pkg|cpu|PASS)|testdbconf'
echo; echo "== Redis round trips per request, by route (issue 47): go test -run '^\$' -bench Trips -benchtime 2000x ./internal/shop"
go test -run '^$' -bench 'Trips' -benchtime 2000x -timeout 10m ./internal/shop | grep -E '^(Benchmark|ok|FAIL)'

if [ "${BENCH_SKIP_GO:-}" = 1 ] || [ "${BENCH_SKIP_HOT:-}" = 1 ]; then exit 0; fi
echo; echo "== waiting room: go test -run '^\$' -bench 'Room\$' -benchtime 3s -count $RUNS ./internal/shop (a join and a ticket read against a product read, one run)"
go test -run '^$' -bench 'Room$' -benchtime 3s -count "$RUNS" -timeout 10m ./internal/shop | grep -E '^(Benchmark|ok|FAIL)'

if [ "${BENCH_SKIP_GO:-}" = 1 ] || [ "${BENCH_SKIP_HOT:-}" = 1 ]; then exit 0; fi
echo; echo "== stock events on the purchase path: go test -run '^\$' -bench ReserveEvents -benchtime 3s ./internal/order (off / PUBLISH in the script / async queue)"
go test -run '^$' -bench 'ReserveEvents' -benchtime 3s -timeout 10m ./internal/order | grep -E '^(Benchmark|ok|FAIL)'
echo; echo "== idle live streams: SHOP_LIVE_IDLE_STREAMS=10000 go test -run TestLiveIdleStreamCost -v ./e2e (memory and CPU per stream)"
SHOP_LIVE_IDLE_STREAMS=${SHOP_LIVE_IDLE_STREAMS:-10000} go test -count=1 -run 'TestLiveIdleStreamCost' -v -timeout 10m ./e2e | grep -E 'idle streams|^(ok|FAIL)' | grep -v live_cost_test
