#!/usr/bin/env bash
# `make test`: go vet, staticcheck, the lint of openapi.yaml (when npx is
# here), then every test with the race detector, against the Redis and
# PostgreSQL that SHOP_TEST_REDIS_URL / SHOP_TEST_DATABASE_URL name, or
# that scripts/services.sh finds or starts, and the stripe-mock and Jaeger
# it builds. Without either store, tests fall back to testcontainers (when
# Docker runs) or skip (failing when CI is set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh
. scripts/tools.sh

if [ -z "${SHOP_TEST_REDIS_URL:-}" ]; then
  SHOP_TEST_REDIS_URL=$(ensure_redis 1)
  [ -n "$SHOP_TEST_REDIS_URL" ] && export SHOP_TEST_REDIS_URL
fi
if [ -z "${SHOP_TEST_DATABASE_URL:-}" ]; then
  SHOP_TEST_DATABASE_URL=$(ensure_postgres postgres)
  [ -n "$SHOP_TEST_DATABASE_URL" ] && export SHOP_TEST_DATABASE_URL
fi
# Stripe's own mock of its API (internal/payment's tests): built once from
# its pinned Go module into the tools cache, answering with its bundled fixtures,
# which tests may change (testenv.StripeMockWith).
STRIPE_MOCK_VERSION=v0.203.0
if [ -z "${SHOP_TEST_STRIPE_MOCK:-}" ]; then
  bin_dir="$TOOLS/stripe-mock-$STRIPE_MOCK_VERSION"
  [ -x "$bin_dir/stripe-mock" ] || GOBIN="$bin_dir" go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION"
  export SHOP_TEST_STRIPE_MOCK="$bin_dir/stripe-mock"
fi
if [ -z "${SHOP_TEST_STRIPE_FIXTURES:-}" ]; then
  mock_dir=$(go mod download -json "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  export SHOP_TEST_STRIPE_FIXTURES="$mock_dir/embedded/openapi/fixtures3.json"
fi
# Jaeger all-in-one (e2e's TestJaegerTraceOfAPurchase, a real collector
# of shop's traces): built once into the tools cache from the tools module, which
# pins it (tools/go.mod), so that the product's go.mod stays clean. The
# first build downloads and compiles a few hundred modules (minutes).
JAEGER_VERSION=$(cd tools && go list -m -f '{{.Version}}' github.com/jaegertracing/jaeger)
if [ -z "${SHOP_TEST_JAEGER:-}" ]; then
  jaeger_bin="$TOOLS/jaeger-$JAEGER_VERSION/jaeger"
  [ -x "$jaeger_bin" ] || (cd tools && go build -o "$jaeger_bin" github.com/jaegertracing/jaeger/cmd/jaeger)
  export SHOP_TEST_JAEGER="$jaeger_bin"
fi
echo "test services: redis=${SHOP_TEST_REDIS_URL:-<testcontainers or skip>} postgres=${SHOP_TEST_DATABASE_URL:-<testcontainers or skip>} stripe-mock=$SHOP_TEST_STRIPE_MOCK jaeger=$SHOP_TEST_JAEGER"

# -trimpath for every go command from here on (vet, the tests, the binary
# e2e builds): without it Go's build cache keys this module's packages by
# their folder, so each fresh clone compiled all of them again, with and
# without -race (docs/testing.md). No code here reads its source paths.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
go vet ./...
scripts/staticcheck.sh
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
# go test's default parallelism, one test a core. Twice that took the
# suite from 5 min 36 s to 4-5 min on 2 cores and passed six runs, but
# in the seventh (a fresh-clone CI run) TestDrillRedisStalled answered
# past its bounds (a 503 after 2.6 s against 2 s): its bounds, and those
# of the other drills that time an answer, are sized for one test a
# core. Raise it only once those run on their own.
#
# Plain `go test ./...` prints its packages' results in import-path order,
# so e2e (minutes) held back every line after it and the run looked silent.
# gotestsum runs go test -json and prints each package's ok/FAIL line as it
# finishes, then every failed test's output, build errors and the count at
# the end of the log, where CI's tail shows them. The events stay in
# .run/test-events.json for `gotestsum tool slowest`.
GOTESTSUM_VERSION=v1.13.0
gotestsum_dir="$TOOLS/gotestsum-$GOTESTSUM_VERSION"
[ -x "$gotestsum_dir/gotestsum" ] || GOBIN="$gotestsum_dir" go install "gotest.tools/gotestsum@$GOTESTSUM_VERSION"
mkdir -p .run
"$gotestsum_dir/gotestsum" --format standard-quiet --jsonfile .run/test-events.json -- \
  -race -count=1 -timeout 15m "$@" ./...
