#!/usr/bin/env bash
# The main job: build the library natively and for WebAssembly, then run the same masked
# attention both ways and print the results side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "==> building (native and WebAssembly SIMD128)"
cmake -S . -B build/native -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native --target maskattn_example >/dev/null
emcmake cmake -S . -B build/wasm-simd -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKATTN_WASM_SIMD=ON >/dev/null
cmake --build build/wasm-simd --target maskattn_example >/dev/null
native=$(build/native/examples/maskattn_example)
wasm=$(node --no-experimental-fetch build/wasm-simd/examples/maskattn_example.js)
echo "==> the same causal, key-padded attention, native (left) and in Node (right)"
paste <(echo "$native") <(echo "$wasm") | awk -F'\t' '{printf "%-52s | %s\n", $1, $2}'
