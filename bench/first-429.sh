#!/usr/bin/env bash
# Times the README's first steps as a new user runs them: from `tollgate
# init` in an empty folder (with its `npm install`) to the first 429 of the
# README's try-it loop, `npm run dev` started right after init. Needs the
# tarball of `scripts/pack`. Prints one line per run; quote the spread and
# the machine's load with it (the README's "about N s" comes from here).
#   bench/first-429.sh [RUNS]       (3 by default; npm's cache as it is)
#   npm_config_cache=$(mktemp -d) bench/first-429.sh 1   (a cold cache)
# Ports 18787-18789, so a `npm run dev` already on 8787 is left alone.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TGZ="$ROOT/build/npm/tollgate-$(node -p "require('$ROOT/packages/tollgate/package.json').version").tgz"
[ -f "$TGZ" ] || { echo "no $TGZ: run scripts/pack first" >&2; exit 1; }
export PORT=18787 ORIGIN_PORT=18788 ADMIN_PORT=18789
secs() { date +%s%N; }
for run in $(seq "${1:-3}"); do
  dir="$(mktemp -d)"
  start=$(secs)
  (cd "$dir" && npx --yes --package "$TGZ" tollgate init my-limiter --tollgate "$TGZ" > init.log 2>&1) || { echo "init failed: $dir/init.log" >&2; exit 1; }
  inited=$(secs)
  (cd "$dir/my-limiter" && exec setsid npm run dev > ../dev.log 2>&1) &
  dev=$!
  first=""
  while [ -z "$first" ] && [ $(( ($(secs) - start) / 1000000000 )) -lt 180 ]; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/example?mode=heavy")
    [ "$code" = 429 ] && first=$(secs)
    [ "$code" = 000 ] && sleep 0.1
  done
  kill -- -"$dev" 2>/dev/null; sleep 2; kill -9 -- -"$dev" 2>/dev/null
  wait "$dev" 2>/dev/null
  ms() { echo "$(( ($1 - start) / 1000000 )) ms"; }
  at="none in 180 s"
  [ -n "$first" ] && at="$(ms "$first")"
  echo "run $run: init $(ms "$inited"), first 429 at $at; load $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$dir"
done
