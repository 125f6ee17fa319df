#!/usr/bin/env bash
# The purchase tail taken apart (BENCHMARKS.md, issue 32): one `shop serve`
# on a fresh redis-server of its own, the limiter off, purchases from the
# plain client (`shop loadtest --procs 0`) at RATE a second for
# TAIL_DURATION (12s), or, without RATE, first at full speed and then at
# half of that. Around the fixed-rate attack it keeps what each layer says:
# the server's /metrics (its histograms), Redis's fsync latency per second
# (LATENCY HISTORY aof-fsync-always), slow log (0.5 ms) and commandstats,
# the disk's counters every 0.5 s (io.txt: time, Dirty kB, Writeback kB,
# then /proc/diskstats' writes, sectors written and ms writing), and the
# AOF itself; then GET /healthz at the same rate, the floor. Loopback
# only; it stops what it started.
#
#   scripts/bench-tail.sh LABEL [RATE]
#
# Knobs: TAIL_FSYNC (always; no: the AOF off), TAIL_REDIS_ARGS (e.g.
# "--auto-aof-rewrite-percentage 0"), TAIL_SERVER_ARGS (e.g. "--linger 0",
# "--writer=false"), TAIL_SERVER_ENV (NAME=VALUE words), TAIL_PG_SYNC
# (the database's synchronous_commit, e.g. off: an experiment only),
# TAIL_BIN (bin/shop), TAIL_REDIS_DIR (where the AOF is written, e.g.
# /dev/shm: a tmpfs, whose fsync waits for no disk), TAIL_CLIENT_NICE (the
# load generator at this nice value), TAIL_LOADTEST_ARGS (more flags for
# it, e.g. "--drain-timeout 1s" with the writer off). Output in .run/bench-tail/LABEL/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh
LABEL=${1:?usage: scripts/bench-tail.sh LABEL [RATE]}
RATE=${2:-}
DUR=${TAIL_DURATION:-12s}
BIN=${TAIL_BIN:-bin/shop}
OUT=.run/bench-tail/$LABEL
RPORT=${TAIL_REDIS_PORT:-16501}
PORT=${TAIL_PORT:-18190}
PG_ADMIN_URL=$(ensure_postgres postgres)
DB_URL=${PG_ADMIN_URL/\/postgres\?/\/shop_tail?}
REDIS_DIR=${TAIL_REDIS_DIR:+$TAIL_REDIS_DIR/shop-bench-tail-$LABEL}
REDIS_DIR=${REDIS_DIR:-$PWD/$OUT/redis}
rm -rf "$OUT" "$REDIS_DIR" && mkdir -p "$OUT/redis" "$REDIS_DIR"
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/shop

aof=(--appendonly yes --appendfsync always)
[ "${TAIL_FSYNC:-always}" = no ] && aof=(--appendonly no)
# shellcheck disable=SC2086 # TAIL_REDIS_ARGS is a list of words
redis-server --daemonize yes --bind 127.0.0.1 --port "$RPORT" --dir "$REDIS_DIR" --save "" "${aof[@]}" \
  --maxmemory-policy noeviction --logfile "$PWD/$OUT/redis/redis.log" --latency-monitor-threshold 1 \
  --slowlog-log-slower-than 500 --slowlog-max-len 100000 ${TAIL_REDIS_ARGS:-} >/dev/null
rc() { redis-cli -p "$RPORT" "$@"; }
server=
cleanup() {
  [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }
  rc shutdown nosave >/dev/null 2>&1 || true
  [ -z "${TAIL_REDIS_DIR:-}" ] || rm -rf "$REDIS_DIR"
}
trap cleanup EXIT
wait_port "$RPORT"

psql "$PG_ADMIN_URL" -qc 'DROP DATABASE IF EXISTS shop_tail' >/dev/null 2>&1
SHOP_DATABASE_URL=$DB_URL "$BIN" migrate --create-db >/dev/null
[ -z "${TAIL_PG_SYNC:-}" ] || psql "$PG_ADMIN_URL" -qc "ALTER DATABASE shop_tail SET synchronous_commit = $TAIL_PG_SYNC" >/dev/null
SHOP_DATABASE_URL=$DB_URL "$BIN" user add --email tail-admin@loadtest.invalid --password tail-admin-password --role admin >/dev/null
# shellcheck disable=SC2086 # the knobs are lists of words
env ${TAIL_SERVER_ENV:-} SHOP_JWT_SECRET="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" SHOP_ADDR=127.0.0.1:$PORT \
  SHOP_REDIS_URL=redis://127.0.0.1:$RPORT/0 SHOP_DATABASE_URL=$DB_URL SHOP_RATE_LIMIT=0 SHOP_KEY_PREFIX=tail: \
  "$BIN" serve ${TAIL_SERVER_ARGS:-} >"$OUT/server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

lt=(nice -n "${TAIL_CLIENT_NICE:-0}" "$BIN" loadtest --target "http://127.0.0.1:$PORT" --admin-email tail-admin@loadtest.invalid
  --admin-password tail-admin-password --users 200 --units 10000000 --per-user-limit 0 --connections 200 --procs 0 --json ${TAIL_LOADTEST_ARGS:-})
if [ -z "$RATE" ]; then
  "${lt[@]}" --rate 0 --duration "$DUR" >"$OUT/max.json" || true
  RATE=$(awk '/"attempts_per_sec"/ {gsub(/,/, ""); printf "%d", $2 / 2; exit}' "$OUT/max.json")
fi
curl -sf "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics-before.txt"
rc latency reset >/dev/null; rc config resetstat >/dev/null; rc slowlog reset >/dev/null
(while :; do
  echo "$(date +%s.%N) $(awk '/^(Dirty|Writeback):/ {printf "%s ", $2}' /proc/meminfo)$(awk '$3 !~ /[0-9]$/ && $8 > 0 {print $8, $10, $11; exit}' /proc/diskstats)"
  sleep 0.5
done) >"$OUT/io.txt" &
io=$!
"${lt[@]}" --rate "$RATE" --duration "$DUR" >"$OUT/rate.json" || true
kill "$io"
curl -sf "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics-after.txt"
rc info persistence >"$OUT/persistence.txt"
rc info commandstats >"$OUT/commandstats.txt"
rc slowlog get 100000 >"$OUT/slowlog.txt"
rc latency history aof-fsync-always >"$OUT/fsync.txt"
# The floor: GET /healthz at the same rate from the same client.
nice -n "${TAIL_CLIENT_NICE:-0}" "$BIN" loadtest get --target "http://127.0.0.1:$PORT" --path /healthz --rate "$RATE" \
  --connections 200 --duration "$DUR" --addresses 200 --procs 0 --json >"$OUT/healthz.json" || true
hz=$(awk '$1 == "\"p99\":" {gsub(/,/, ""); print $2; exit}' "$OUT/healthz.json")
field() { awk -v k="\"$1\"" '$1 == k":" {gsub(/,/, ""); print $2; exit}' "$OUT/rate.json"; }
# LATENCY HISTORY: pairs of lines, a second and its worst fsync (ms).
fsync=$(paste -d' ' - - <"$OUT/fsync.txt" | awk '{print $2}' | sort -n | awk '{a[NR] = $1} END {if (NR) printf "median %s, max %s", a[int((NR + 1) / 2)], a[NR]; else print "none over 1 ms"}')
echo "$LABEL at $RATE/s: $(field attempts_per_sec)/s, p50 $(field p50) ms, p99 $(field p99) ms (/healthz $hz ms); worst fsync a second: $fsync ms (files in $OUT)"
