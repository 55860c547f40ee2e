#!/usr/bin/env bash
# The main job: build the WebAssembly modules (SIMD128, scalar, relaxed SIMD, threaded) and serve
# the demo page on 127.0.0.1, printing its URL. PORT=N (or --port N) picks the port; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh start   # only what building and serving the demo need; npm test installs the rest
mkdir -p build/pack
echo "==> building the WebAssembly modules (first time: a minute or two)"
bash scripts/build-wasm.sh
# The package as npm would install it, for visitors (maskattn is not on the npm registry): the server
# offers it at /maskattn-VERSION.tgz. Scripts off: the modules were just built.
echo "==> packing the npm package into build/pack/"
npm pack --ignore-scripts --silent --pack-destination build/pack >/dev/null
echo "==> serving the demo (Ctrl-C to stop)"
exec node scripts/serve.mjs "$@"
