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
# The e2e helpers want the test Redis too (a key prefix of its own there);
# every setup measured runs on private redis-servers.
e2e_bench cluster TestBenchCluster SHOP_BENCH_CLUSTER
