# The two commands a new user needs: `make run` and `make test`.
.PHONY: run reset-demo test bench bench-room bench-cluster bench-draw build vet fmt tidy clean-run

run: ## migrate and serve the API on 127.0.0.1:8080 (SHOP_ADDR=:8080 for every interface), starting Redis/PostgreSQL if needed
	@scripts/run.sh

reset-demo: ## seed make run's demo afresh (shop seed demo --reset): only the demo's products, rounds, orders and shoppers are cleared
	@scripts/reset-demo.sh

test: ## go vet, staticcheck + all tests with -race (unit, integration and e2e)
	@scripts/test.sh

bench: ## shop bench: shop loadtest vs redis-benchmark on the same Redis, writer drain, hot-path benchmarks (BENCHMARKS.md); flags as BENCH_* variables
	@go build -o bin/shop ./cmd/shop
	@bash -c '. scripts/services.sh && exec bin/shop bench --postgres-url "$$(ensure_postgres postgres)" \
	  --shared-redis-url "$$(ensure_redis 0)" --test-redis-url "$${SHOP_TEST_REDIS_URL:-$$(ensure_redis 1)}"'

bench-room: ## issue 33: purchases offered at 5x the maximum, with and without a waiting room, beside the unloaded p99 (BENCHMARKS.md)
	@scripts/bench-room.sh

bench-cluster: ## purchases/s on a plain Redis, a 1-master and a 3-master cluster in one run, and the reserve script per master (BENCHMARKS.md)
	@scripts/bench-cluster.sh

bench-draw: ## issue 50: entries/s beside purchases/s, a draw of 100,000 entries for 1,000 units, storage per entry (BENCHMARKS.md)
	@scripts/bench-draw.sh

build:
	go build -o bin/shop ./cmd/shop

vet:
	go vet ./...

fmt:
	gofmt -l -w .

tidy:
	go mod tidy

clean-run: ## stop the private Redis/PostgreSQL that make run/test started
	-@[ -f .run/redis/redis.pid ] && kill $$(cat .run/redis/redis.pid) || true
	-@[ -d .run/pg/data ] && { if [ "$$(id -u)" = 0 ]; then runuser -u postgres -- $$(ls -d /usr/lib/postgresql/*/bin | head -1)/pg_ctl -D .run/pg/data stop; else pg_ctl -D .run/pg/data stop; fi; } || true
