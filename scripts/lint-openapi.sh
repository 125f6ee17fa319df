#!/usr/bin/env bash
# Lints openapi/openapi.yaml with Redocly CLI (openapi/redocly.yaml) and
# Spectral's spectral:oas rules (openapi/spectral.yaml); either one's error
# or warning fails it. The linters are npm packages at pinned versions,
# installed on first use into the tools cache (scripts/tools.sh; npm
# install --prefix: nothing global). Needs Node.js 18.17+ and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/tools.sh

REDOCLY_VERSION=1.34.20 # the 1.x line runs on Node 18 (Debian 12's); 2.x needs 20.19+
SPECTRAL_VERSION=6.16.3
dir="$TOOLS/openapi-lint-redocly-$REDOCLY_VERSION-spectral-$SPECTRAL_VERSION"
stamp="$dir/.installed"

if [ ! -f "$stamp" ]; then
  echo "lint-openapi: installing @redocly/cli@$REDOCLY_VERSION and @stoplight/spectral-cli@$SPECTRAL_VERSION into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
    "@redocly/cli@$REDOCLY_VERSION" "@stoplight/spectral-cli@$SPECTRAL_VERSION" >/dev/null
  touch "$stamp"
fi

# No telemetry, no update check: the lint reads only the files given.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
"$dir/node_modules/.bin/redocly" lint --config openapi/redocly.yaml --format stylish openapi/openapi.yaml
"$dir/node_modules/.bin/spectral" lint --ruleset openapi/spectral.yaml --fail-severity warn openapi/openapi.yaml
echo "lint-openapi: openapi/openapi.yaml passes redocly (recommended-strict) and spectral (spectral:oas)"
