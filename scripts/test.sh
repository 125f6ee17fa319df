#!/usr/bin/env bash
# `make test`: go vet, the lint of openapi.yaml (when npx is here), then
# every test with the race detector, against the Redis and PostgreSQL that
# SHOP_TEST_REDIS_URL / SHOP_TEST_DATABASE_URL name, or that
# scripts/services.sh finds or starts. Without either, tests fall
# back to testcontainers (when Docker runs) or skip (failing when CI is set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

if [ -z "${SHOP_TEST_REDIS_URL:-}" ]; then
  SHOP_TEST_REDIS_URL=$(ensure_redis 1)
  [ -n "$SHOP_TEST_REDIS_URL" ] && export SHOP_TEST_REDIS_URL
fi
if [ -z "${SHOP_TEST_DATABASE_URL:-}" ]; then
  SHOP_TEST_DATABASE_URL=$(ensure_postgres postgres)
  [ -n "$SHOP_TEST_DATABASE_URL" ] && export SHOP_TEST_DATABASE_URL
fi
echo "test services: redis=${SHOP_TEST_REDIS_URL:-<testcontainers or skip>} postgres=${SHOP_TEST_DATABASE_URL:-<testcontainers or skip>}"

go vet ./...
# openapi.yaml's lint (Redocly and Spectral, npm packages) when Node.js is
# here; CI always has it (.ci/run installs it).
if command -v npx >/dev/null; then
  scripts/lint-openapi.sh
elif [ -n "${CI:-}" ]; then
  echo "test: no npx, so openapi.yaml cannot be linted (CI is set, so this fails)" >&2
  exit 1
else
  echo "test: no npx: openapi.yaml not linted (install Node.js and npm for scripts/lint-openapi.sh)"
fi
# Twice as many parallel tests as cores (go test's default is one a
# core): most end-to-end drills spend their time waiting out an outage, a
# timeout or an idle minute, and hold their slot while the cores idle.
# On 2 cores, warm caches, this took the e2e package from 280 s to
# 173-227 s and the suite from 5 min 36 s to 4-5 min (three runs, all
# green). At four a core (-parallel 8) three tests failed in a run of
# the suite; two of them now size their waits by what they wait for,
# but four a core has not been run green, so it is not the default.
# The cores are those this process may use (nproc: its CPU affinity),
# fewer where a cgroup quota says so (a container's --cpus). A
# -parallel in GOFLAGS or in "$@" wins.
cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
if [ -r /sys/fs/cgroup/cpu.max ] && read -r quota period </sys/fs/cgroup/cpu.max && [ "$quota" != max ]; then
  quota=$(((quota + period - 1) / period))
  [ "$quota" -ge "$cores" ] || cores=$quota
fi
parallel=(-parallel "$((2 * cores))")
case " ${GOFLAGS:-} " in *" -parallel"* | *" -test.parallel"*) parallel=() ;; esac
go test -race -count=1 -timeout 15m ${parallel[@]+"${parallel[@]}"} "$@" ./...
