#!/usr/bin/env bash
# `make bench-cluster`: the purchase throughput of the same binary on a
# plain Redis, a 1-master Redis Cluster and a 3-master cluster, in one run
# (e2e TestBenchCluster: each setup on its own private redis-servers, AOF
# with appendfsync always, one `shop serve`, a sale over BENCH_SKUS SKUs
# spread over every master), and the Redis side alone: redis-benchmark of
# the reserve script on every master at once. Prints one table; the output
# also goes to .run/bench/cluster.txt.
#
# Knobs (environment): BENCH_RUNS (1; rounds alternate the setups' order),
# BENCH_DURATION (15s), BENCH_CONNECTIONS (64), BENCH_SKUS (48),
# BENCH_USERS (200), BENCH_RB_CLIENTS (50), BENCH_RB_REQUESTS (50000).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "bench-cluster: $tool is required (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
if [ -z "${SHOP_TEST_DATABASE_URL:-}" ]; then
  SHOP_TEST_DATABASE_URL=$(ensure_postgres postgres)
  [ -n "$SHOP_TEST_DATABASE_URL" ] || { echo "bench-cluster: need PostgreSQL (see make run)" >&2; exit 1; }
  export SHOP_TEST_DATABASE_URL
fi
# The e2e helpers want the test Redis too (a key prefix of its own there);
# every setup measured runs on private redis-servers.
if [ -z "${SHOP_TEST_REDIS_URL:-}" ]; then
  SHOP_TEST_REDIS_URL=$(ensure_redis 1)
  export SHOP_TEST_REDIS_URL
fi
mkdir -p .run/bench
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3)"
SHOP_BENCH_CLUSTER=1 go test -v -count=1 -timeout 30m -run '^TestBenchCluster$' ./e2e 2>&1 | grep -v -e 'main_test.go:' -e testdbconf -e '^=== ' -e 'pool.go:' | tee .run/bench/cluster.txt
