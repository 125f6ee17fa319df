#!/usr/bin/env bash
# `make run`: a serving API on 127.0.0.1:8080 with no other step (only this
# machine reaches it: the demo admin's password is public; set
# SHOP_ADDR=:8080 to listen on every interface). Uses
# SHOP_REDIS_URL / SHOP_DATABASE_URL when set; otherwise Redis and PostgreSQL
# answering on their default local ports; otherwise private ones started
# from the machine's binaries into .run/; otherwise `docker compose` from
# deploy/ when a Docker engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

if [ -z "${SHOP_REDIS_URL:-}" ]; then SHOP_REDIS_URL=$(ensure_redis 0); fi
if [ -z "${SHOP_DATABASE_URL:-}" ]; then SHOP_DATABASE_URL=$(ensure_postgres shop); fi

if [ -z "$SHOP_REDIS_URL" ] || [ -z "$SHOP_DATABASE_URL" ]; then
  if docker_answers; then
    log "no local Redis/PostgreSQL binaries: running the stack with docker compose"
    exec docker compose -f deploy/compose.yaml up --build
  fi
  log "need Redis and PostgreSQL: install redis-server and postgresql, set SHOP_REDIS_URL and SHOP_DATABASE_URL, or run a Docker engine"
  exit 1
fi
export SHOP_REDIS_URL SHOP_DATABASE_URL
export SHOP_ENV=${SHOP_ENV:-dev}
# The demo runs `shop loadtest --forwarded-for` beside a browser on this
# machine: trusting loopback as a proxy gives the load's shoppers their own
# rate-limit windows, so the browser's own is not spent by them.
export SHOP_TRUSTED_PROXIES=${SHOP_TRUSTED_PROXIES:-127.0.0.1}
# Loopback by default: the seeded demo admin's password is in the docs.
addr=${SHOP_ADDR:-127.0.0.1:8080}
export SHOP_ADDR=$addr

mkdir -p bin
# Say so before the silent build: a first one compiles every dependency.
echo "run: building bin/shop (a first build compiles every dependency: about 80 s on an idle 2-core machine, far longer on a busy one; later builds take seconds)..." >&2
go build -o bin/shop ./cmd/shop
bin/shop migrate --create-db >/dev/null
# seed demo prints the demo admin and the flash sale's units as the store
# has them (a walk-through may have opened another round since).
demo=$(bin/shop seed demo)

port=${addr##*:}
cat <<MSG

shop is starting on $addr: http://127.0.0.1:$port  (redis: $SHOP_REDIS_URL, postgres: $SHOP_DATABASE_URL)
Only this machine can reach it; SHOP_ADDR=:$port make run listens on every interface.
$demo
Open http://127.0.0.1:$port/ in a browser: the storefront, with live stock.
Open http://127.0.0.1:$port/admin: the admin console; sign in as the demo admin, admin@demo.shop / demo-admin-password.
Try (docs/getting-started.md walks through a whole sale; -w prints each status):
  curl -s -w '\n%{http_code}\n' http://127.0.0.1:$port/readyz
  curl -s -w '\n%{http_code}\n' 'http://127.0.0.1:$port/api/v1/products?category=electronics'
  curl -s -w '\n%{http_code}\n' -X POST http://127.0.0.1:$port/api/v1/auth/register \\
       -H 'Content-Type: application/json' -d '{"email":"me@example.com","password":"my-password"}'
  curl -s http://127.0.0.1:$port/metrics | grep shop_purchases
Stop with Ctrl-C.

MSG
exec bin/shop serve
