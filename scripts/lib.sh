# Shared helpers for the scripts in this folder. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$ROOT/node_modules/.bin:$PATH"
export WRANGLER_SEND_METRICS=false
# wrangler is pinned to 4.86, the last release that runs on Node.js 20 (4.87 needs 22).
node_major="$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')"
if [ "${node_major:-0}" -lt 20 ]; then
  echo "tollgate's scripts need Node.js 20 or later (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
# No fetch of the Request.cf sample from workers.cloudflare.com (wrangler dev, Miniflare):
# local runs use Miniflare's placeholder and need nothing from the internet.
export CLOUDFLARE_CF_FETCH_ENABLED=false
# worker-build downloads these from GitHub/URLs unless pointed at local copies.
export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
WORKER_BUILD_VERSION="0.8.7"

say() { printf '\033[1;34m==>\033[0m %s\n' "$*"; }

# The wasm-bindgen version pinned in Cargo.lock (the CLI must match exactly).
locked_wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}
