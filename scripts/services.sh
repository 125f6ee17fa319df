# shellcheck shell=bash
# Finds or starts the Redis and PostgreSQL that `make run`, `make test` and
# .ci/run use. Source it, then call ensure_redis / ensure_postgres; each
# prints the URL of a server that answers, or nothing when none can be had.
#
# Order, for each service on its own:
#   1. a server already answering on its default local port;
#   2. a private server started from the machine's binaries, kept in the
#      git-ignored .run/ folder (redis-server; initdb + pg_ctl);
#   3. nothing: the caller decides (docker compose, testcontainers, or fail).

SHOP_ROOT=${SHOP_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
RUN_DIR="$SHOP_ROOT/.run"
PRIVATE_REDIS_PORT=${PRIVATE_REDIS_PORT:-6399}
PRIVATE_PG_PORT=${PRIVATE_PG_PORT:-5499}

log() { echo "services: $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local i
  for i in $(seq 1 100); do port_open "$1" && return 0; sleep 0.1; done
  return 1
}

redis_answers() {
  if command -v redis-cli >/dev/null; then
    [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]
  else
    port_open "$1"
  fi
}

# ensure_redis DB: prints redis://127.0.0.1:PORT/DB
ensure_redis() {
  local db=${1:-0}
  if redis_answers 6379; then
    echo "redis://127.0.0.1:6379/$db"; return 0
  fi
  if redis_answers "$PRIVATE_REDIS_PORT"; then
    echo "redis://127.0.0.1:$PRIVATE_REDIS_PORT/$db"; return 0
  fi
  command -v redis-server >/dev/null || return 0
  mkdir -p "$RUN_DIR/redis"
  log "starting a private redis-server on port $PRIVATE_REDIS_PORT (data in .run/redis)"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$PRIVATE_REDIS_PORT" \
    --dir "$RUN_DIR/redis" --appendonly yes --appendfsync everysec --save "" \
    --maxmemory-policy noeviction \
    --pidfile "$RUN_DIR/redis/redis.pid" --logfile "$RUN_DIR/redis/redis.log" >/dev/null
  wait_port "$PRIVATE_REDIS_PORT" && echo "redis://127.0.0.1:$PRIVATE_REDIS_PORT/$db"
}

pg_bin() {
  local d
  if command -v initdb >/dev/null; then dirname "$(command -v initdb)"; return; fi
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && { echo "$d"; return; }; done
}

# pg_works PORT: can user postgres connect without a password?
pg_works() {
  if command -v psql >/dev/null; then
    psql "postgres://postgres@127.0.0.1:$1/postgres?sslmode=disable&connect_timeout=3" -Atqc 'select 1' >/dev/null 2>&1
  else
    port_open "$1"
  fi
}

# ensure_postgres DBNAME: prints postgres://postgres@127.0.0.1:PORT/DBNAME
ensure_postgres() {
  local db=${1:-postgres} bin dir=$RUN_DIR/pg run_as=()
  if pg_works 5432; then
    echo "postgres://postgres@127.0.0.1:5432/$db?sslmode=disable"; return 0
  fi
  if pg_works "$PRIVATE_PG_PORT"; then
    echo "postgres://postgres@127.0.0.1:$PRIVATE_PG_PORT/$db?sslmode=disable"; return 0
  fi
  bin=$(pg_bin)
  [ -n "$bin" ] || return 0
  # PostgreSQL refuses to run as root: use its own system user if we are.
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    run_as=(runuser -u postgres --)
  fi
  mkdir -p "$dir"
  if [ ! -s "$dir/data/PG_VERSION" ]; then
    log "creating a private PostgreSQL cluster in .run/pg (trust auth, user postgres)"
    mkdir -p "$dir/data"
    [ "$(id -u)" = 0 ] && chown -R postgres "$dir"
    "${run_as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 >"$dir/initdb.log" 2>&1 || {
      log "initdb failed: see .run/pg/initdb.log"; return 0; }
  fi
  [ "$(id -u)" = 0 ] && chown -R postgres "$dir"
  log "starting the private PostgreSQL on port $PRIVATE_PG_PORT"
  "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -w -t 30 \
    -o "-p $PRIVATE_PG_PORT -k $dir -c listen_addresses=127.0.0.1" start >/dev/null || {
    log "pg_ctl start failed: see .run/pg/pg.log"; return 0; }
  pg_works "$PRIVATE_PG_PORT" && echo "postgres://postgres@127.0.0.1:$PRIVATE_PG_PORT/$db?sslmode=disable"
}

docker_answers() { command -v docker >/dev/null && timeout 5 docker info >/dev/null 2>&1; }

# e2e_bench NAME TEST FLAG: runs the e2e benchmark TEST (skipped unless
# FLAG=1) on the test services (started if needed: the e2e helpers want
# both, each test with a database and key prefix of its own), after a
# line on the machine and its load; the output also goes to
# .run/bench/NAME.txt.
e2e_bench() {
  local name=$1 test=$2 flag=$3
  if [ -z "${SHOP_TEST_DATABASE_URL:-}" ]; then
    SHOP_TEST_DATABASE_URL=$(ensure_postgres postgres)
    [ -n "$SHOP_TEST_DATABASE_URL" ] || { echo "bench-$name: need PostgreSQL (see make run)" >&2; return 1; }
    export SHOP_TEST_DATABASE_URL
  fi
  if [ -z "${SHOP_TEST_REDIS_URL:-}" ]; then
    SHOP_TEST_REDIS_URL=$(ensure_redis 1)
    export SHOP_TEST_REDIS_URL
  fi
  mkdir -p .run/bench
  echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "== $(go version | cut -d' ' -f3), $(redis-server --version 2>/dev/null | cut -d' ' -f3), $(psql --version 2>/dev/null)"
  env "$flag=1" go test -v -count=1 -timeout 30m -run "^$test\$" ./e2e 2>&1 |
    grep --line-buffered -v -e 'main_test.go:' -e testdbconf -e '^=== ' -e 'pool.go:' | tee ".run/bench/$name.txt"
}
