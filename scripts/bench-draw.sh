#!/usr/bin/env bash
# `make bench-draw`: the costs of draws (e2e TestBenchDraw, BENCHMARKS.md
# "Draws"), one `shop serve` with the test provider. First purchases, then
# entries, through HTTP the same way in the same run, with the shop's Redis
# keys read around the entries; then a draw of 100,000 entries for 1,000
# units, its shoppers and entries inserted in SQL (entering 100,000 through
# HTTP would take minutes and measure nothing the first load does not),
# drawn by the runner once its close is moved to now: the time to every
# winner captured, then to every loser cancelled, and draw_entries' size
# per entry. The output also goes to .run/bench/draw.txt.
#
# Knobs (environment): BENCH_DURATION (10s per load), BENCH_CONNECTIONS
# (32), BENCH_SKUS (8), BENCH_USERS (200), BENCH_DRAWS (100),
# BENCH_DRAW_ENTRIES (100000), BENCH_DRAW_UNITS (1000).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/services.sh

e2e_bench draw TestBenchDraw SHOP_BENCH_DRAW
