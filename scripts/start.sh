#!/usr/bin/env bash
# The main job: build the WebAssembly modules (SIMD128, scalar, relaxed SIMD, threaded) and serve
# the demo page on 127.0.0.1, printing its URL. PORT=N (or --port N) picks the port; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "==> building the WebAssembly modules (first time: a minute or two)"
bash scripts/build-wasm.sh
echo "==> serving the demo (Ctrl-C to stop)"
exec node scripts/serve.mjs "$@"
