#!/usr/bin/env bash
# staticcheck (honnef.co/go/tools) over every package, its default checks
# (staticcheck.conf would narrow them; there is none). Built once at a
# pinned version into the tools cache (scripts/tools.sh), like the other
# test tools, so the product's go.mod does not carry it. Any finding fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/tools.sh

STATICCHECK_VERSION=v0.8.2
bin_dir="$TOOLS/staticcheck-$STATICCHECK_VERSION"
if [ ! -x "$bin_dir/staticcheck" ]; then
  echo "staticcheck: installing honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION into $bin_dir"
  GOBIN="$bin_dir" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
"$bin_dir/staticcheck" ./...
echo "staticcheck: no findings"
