#!/usr/bin/env bash
# `make reset-demo`: the demo of `make run` seeded afresh, on the same
# Redis and PostgreSQL `make run` finds (SHOP_REDIS_URL / SHOP_DATABASE_URL
# when set). Only the demo's data is cleared (`shop seed demo -h` says
# which); it may run beside `make run`, whose demo admin stays signed in.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

if [ -z "${SHOP_REDIS_URL:-}" ]; then SHOP_REDIS_URL=$(ensure_redis 0); fi
if [ -z "${SHOP_DATABASE_URL:-}" ]; then SHOP_DATABASE_URL=$(ensure_postgres shop); fi
if [ -z "$SHOP_REDIS_URL" ] || [ -z "$SHOP_DATABASE_URL" ]; then
  log "need the Redis and PostgreSQL of make run: set SHOP_REDIS_URL and SHOP_DATABASE_URL"
  exit 1
fi
export SHOP_REDIS_URL SHOP_DATABASE_URL
export SHOP_ENV=${SHOP_ENV:-dev}

mkdir -p bin
go build -o bin/shop ./cmd/shop
bin/shop migrate --create-db >/dev/null
exec bin/shop seed demo --reset
