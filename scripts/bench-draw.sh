#!/usr/bin/env bash
# `make bench-draw`: the costs of draws (e2e TestBenchDraw, BENCHMARKS.md
# "Draws"): entries/s beside purchases/s through HTTP in one run, a draw
# of 100,000 entries (inserted in SQL) for 1,000 units with the test
# provider, and the storage per entry in PostgreSQL and Redis. Prints one
# table; the output also goes to .run/bench/draw.txt.
#
# Knobs (environment): BENCH_DURATION (10s per load), BENCH_CONNECTIONS
# (32), BENCH_SKUS (8), BENCH_USERS (200), BENCH_DRAWS (100),
# BENCH_DRAW_ENTRIES (100000), BENCH_DRAW_UNITS (1000).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

if [ -z "${SHOP_TEST_DATABASE_URL:-}" ]; then
  SHOP_TEST_DATABASE_URL=$(ensure_postgres postgres)
  [ -n "$SHOP_TEST_DATABASE_URL" ] || { echo "bench-draw: need PostgreSQL (see make run)" >&2; exit 1; }
  export SHOP_TEST_DATABASE_URL
fi
if [ -z "${SHOP_TEST_REDIS_URL:-}" ]; then
  SHOP_TEST_REDIS_URL=$(ensure_redis 1)
  export SHOP_TEST_REDIS_URL
fi
mkdir -p .run/bench
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(go version | cut -d' ' -f3), $(redis-server --version 2>/dev/null | cut -d' ' -f3), $(psql --version 2>/dev/null)"
SHOP_BENCH_DRAW=1 go test -v -count=1 -timeout 30m -run '^TestBenchDraw$' ./e2e 2>&1 | grep -v -e 'main_test.go:' -e testdbconf -e '^=== ' -e 'pool.go:' | tee .run/bench/draw.txt
