#!/usr/bin/env bash
# Builds the WebAssembly modules the npm package ships into dist/ (js/load.js picks one at run
# time). The builds, their CMake flags and their files are the table in js/builds.js (read here
# through scripts/builds.mjs). Threaded builds add a browser worker script (.worker.js) and a
# CommonJS glue for Node (.node.cjs, .node.worker.cjs) that loads the same .wasm.
# MASKATTN_WASM_BUILDS="simd scalar" builds only those (development); the default is all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist
[ -x node_modules/.bin/wasm-opt ] || { echo "build-wasm.sh: node_modules/.bin/wasm-opt missing: run npm install (package binaryen)" >&2; exit 1; }
table=$(node scripts/builds.mjs)
builds=${MASKATTN_WASM_BUILDS:-$(cut -f2 <<<"$table" | tr '\n' ' ')}
for build in $builds; do
  row=$(awk -F'\t' -v b="$build" '$2 == b' <<<"$table")
  [ -n "$row" ] || { echo "build-wasm.sh: unknown build '$build' (js/builds.js has: $(cut -f2 <<<"$table" | tr '\n' ' '))" >&2; exit 2; }
  IFS=$'\t' read -r name _ cmake_flags _ threads files <<<"$row"
  read -ra flags <<<"$cmake_flags"
  targets=(maskattn_js)
  [ "$threads" = yes ] && targets+=(maskattn_js_node)
  dir=build/wasm-$build
  echo "==> $name"
  emcmake cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
  # The pthreads + memory-growth warning is expected: the glue's own heap accesses check for
  # growth; js/load.js (trackSharedMemory) makes the HEAP views follow the memory.
  cmake --build "$dir" -j2 --target "${targets[@]}" 2>&1 | { grep -v -e 'USE_PTHREADS + ALLOW_MEMORY_GROWTH' -e '^\[' || true; }
  out=$dir/bindings
  [ -f "$out/$name.mjs" ] || { echo "build-wasm.sh: $out/$name.mjs missing: cmake/maskattnWasmBuild.cmake names the build after the flags; js/builds.js's name must match" >&2; exit 1; }
  if [ "$threads" = yes ]; then
    # One .wasm for both glues: they come from the same objects and settings.
    cmp -s "$out/$name.wasm" "$out/$name.node.wasm" || { echo "build-wasm.sh: $name: the Node glue's .wasm differs from the browser's" >&2; exit 1; }
  fi
  for file in $files; do
    # .node.worker.cjs: Emscripten writes .node.worker.js; the package is "type": "module", and Node's
    # worker_threads must run this one as CommonJS.
    install -m 644 "$out/${file/%.node.worker.cjs/.node.worker.js}" "dist/$file"
  done
done
# Files of builds no longer in the table would ship with the package ("files": dist/maskattn-*).
all_files=$(node scripts/builds.mjs files)
for file in dist/*; do
  grep -qxF "${file#dist/}" <<<"$all_files" || { echo "build-wasm.sh: removing $file (no build in js/builds.js makes it)"; rm -f "$file"; }
done
ls -l dist | awk 'NR>1 {printf "  dist/%-40s %8d bytes\n", $9, $5}'
