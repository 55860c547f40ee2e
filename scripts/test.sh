#!/usr/bin/env bash
# Every test of maskattn: native gtest per dispatch target, the sanitizer build, the installed
# package consumer, the WebAssembly SIMD128 and scalar builds under Node, and (when present) the
# JavaScript package and browser tests. Prints one "N passed, N failed" line at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

passed=0 failed=0 log=$(mktemp)
step() { printf '\n==> %s\n' "$*"; }
# Runs a command, shows its output, adds its ctest / node:test counts to the totals.
run() {
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local counts
  counts=$(grep -Eo '[0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
  if [ -n "$counts" ]; then
    local f=${counts%% *} total=${counts##* }
    passed=$((passed + total - f)); failed=$((failed + f))
  elif grep -qE '^# (pass|fail) [0-9]+' "$log"; then
    passed=$((passed + $(grep -E '^# pass' "$log" | awk '{s+=$3} END {print s+0}')))
    failed=$((failed + $(grep -E '^# fail' "$log" | awk '{s+=$3} END {print s+0}')))
  elif [ "$status" -ne 0 ]; then
    failed=$((failed + 1))
  fi
  [ "$status" -eq 0 ] || echo "FAILED: $*"
  return 0
}
build() {  # build DIR [cmake args...]: configure once, then build
  local dir=$1; shift
  if [[ "$dir" == *wasm* ]]; then
    emcmake cmake -S . -B "$dir" -G Ninja "$@" >/dev/null && cmake --build "$dir"
  else
    cmake -S . -B "$dir" -G Ninja "$@" >/dev/null && cmake --build "$dir"
  fi
}

step "native build (Release): kernels sse2, avx2, avx512 with run-time dispatch"
run build build/native -DCMAKE_BUILD_TYPE=Release
step "native tests: every dispatch target the CPU has, the README example, the installed package"
run ctest --test-dir build/native --output-on-failure

step "native build with AddressSanitizer + UndefinedBehaviorSanitizer"
run build build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMASKATTN_SANITIZE=ON -DMASKATTN_BUILD_EXAMPLES=OFF
step "sanitizer tests"
run env ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build/asan --output-on-failure -E installed_package_consumer

for mode in simd scalar; do
  flag=$([ $mode = simd ] && echo ON || echo OFF)
  step "WebAssembly build ($mode) with Emscripten"
  run build build/wasm-$mode -DCMAKE_BUILD_TYPE=Release -DMASKATTN_WASM_SIMD=$flag
  step "WebAssembly tests ($mode) under Node"
  run ctest --test-dir build/wasm-$mode --output-on-failure
done

if [ -f scripts/test-js.sh ]; then
  step "JavaScript package, types and browser tests"
  run bash scripts/test-js.sh
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
