#!/usr/bin/env bash
# Builds the two WebAssembly modules the npm package ships (SIMD128 and scalar) into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist
for mode in simd scalar; do
  flag=$([ $mode = simd ] && echo ON || echo OFF)
  emcmake cmake -S . -B build/wasm-$mode -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKATTN_WASM_SIMD=$flag >/dev/null
  cmake --build build/wasm-$mode --target maskattn_js >/dev/null
  install -m 644 build/wasm-$mode/bindings/maskattn-$mode.mjs build/wasm-$mode/bindings/maskattn-$mode.wasm dist/
done
ls -l dist | awk 'NR>1 {printf "  dist/%-22s %8d bytes\n", $9, $5}'
