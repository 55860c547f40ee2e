#!/usr/bin/env bash
# Builds the WebAssembly modules the npm package ships into dist/ (js/load.js picks one at run time):
#   maskattn-scalar                 engines without SIMD128
#   maskattn-simd                   SIMD128
#   maskattn-simd-relaxed           SIMD128 + relaxed SIMD (fused multiply-add), clang-19 + npm binaryen
#   maskattn-simd-threads           SIMD128 + pthreads (Node; cross-origin isolated pages)
#   maskattn-simd-relaxed-threads   both
# Threaded builds add a browser worker script (.worker.js) and a CommonJS glue for Node
# (.node.cjs, .node.worker.cjs) that loads the same .wasm.
# MASKATTN_WASM_BUILDS="simd scalar" builds only those (development); the default is all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist
builds=${MASKATTN_WASM_BUILDS:-"scalar simd simd-relaxed simd-threads simd-relaxed-threads"}
[ -x node_modules/.bin/wasm-opt ] || { echo "build-wasm.sh: node_modules/.bin/wasm-opt missing: run npm install (package binaryen)" >&2; exit 1; }
for build in $builds; do
  flags=(-DMASKATTN_WASM_SIMD=ON -DMASKATTN_WASM_RELAXED=OFF -DMASKATTN_WASM_THREADS=OFF)
  targets=(maskattn_js)
  case $build in
    scalar) flags[0]=-DMASKATTN_WASM_SIMD=OFF ;;
    simd) ;;
    simd-relaxed) flags[1]=-DMASKATTN_WASM_RELAXED=ON ;;
    simd-threads) flags[2]=-DMASKATTN_WASM_THREADS=ON ;;
    simd-relaxed-threads) flags[1]=-DMASKATTN_WASM_RELAXED=ON; flags[2]=-DMASKATTN_WASM_THREADS=ON ;;
    *) echo "build-wasm.sh: unknown build '$build'" >&2; exit 2 ;;
  esac
  [[ $build == *threads ]] && targets+=(maskattn_js_node)
  dir=build/wasm-$build
  name=maskattn-$build
  echo "==> $name"
  emcmake cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
  # The pthreads + memory-growth warning is expected: the glue's own heap accesses check for
  # growth; js/load.js (trackSharedMemory) makes the HEAP views follow the memory.
  cmake --build "$dir" -j2 --target "${targets[@]}" 2>&1 | { grep -v -e 'USE_PTHREADS + ALLOW_MEMORY_GROWTH' -e '^\[' || true; }
  out=$dir/bindings
  install -m 644 "$out/$name.mjs" "$out/$name.wasm" dist/
  if [[ $build == *threads ]]; then
    # One .wasm for both glues: they come from the same objects and settings.
    cmp -s "$out/$name.wasm" "$out/$name.node.wasm" || { echo "build-wasm.sh: $name: the Node glue's .wasm differs from the browser's" >&2; exit 1; }
    install -m 644 "$out/$name.worker.js" "$out/$name.node.cjs" dist/
    # .cjs: the package is "type": "module", and Node's worker_threads must run this one as CommonJS.
    install -m 644 "$out/$name.node.worker.js" "dist/$name.node.worker.cjs"
  fi
done
ls -l dist | awk 'NR>1 {printf "  dist/%-40s %8d bytes\n", $9, $5}'
