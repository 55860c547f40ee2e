#!/usr/bin/env bash
# Every test of maskattn: native gtest per dispatch target, the sanitizer build, the installed
# package consumer, the aarch64 (neon64) cross build under qemu, the WebAssembly SIMD128, scalar,
# relaxed-SIMD and threaded builds under Node, and (when present) the JavaScript package and browser
# tests. Prints one "N passed, N failed" line at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1

# A compile cache for this run's builds (and the next run's), in build/ccache: the docs' commands
# build the Emscripten package (simd, relaxed, threads) in a clean copy with the same flags as the
# WebAssembly test builds below. Depend mode (the compiler's own dependency list, no preprocessor
# run: a miss costs what the compile does) and paths relative to the checkout, so that the copy
# finds them (tests/docs/commands.test.mjs points CCACHE_BASEDIR at its copy). Not where the
# caller chose a launcher already.
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR="$PWD/build/ccache" CCACHE_BASEDIR="$PWD" CCACHE_DEPEND=1 \
    CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=2G
fi

passed=0 failed=0 log=$(mktemp)
started=$SECONDS
# Each phase's start is printed as it begins; the table at the end gives each one's duration.
phases=() phase_start=()
step() {
  phases+=("$*")
  phase_start+=($((SECONDS - started)))
  printf '\n==> [%s] %s\n' "$(date -u -d @$((SECONDS - started)) +%M:%S)" "$*"
}
phase_times() {
  local n=${#phases[@]} i end
  echo
  echo "Phase durations (mm:ss):"
  for ((i = 0; i < n; ++i)); do
    end=$([ $((i + 1)) -lt "$n" ] && echo "${phase_start[$((i + 1))]}" || echo $((SECONDS - started)))
    printf '  %s  %s\n' "$(date -u -d @$((end - phase_start[i])) +%M:%S)" "${phases[$i]:0:100}"
  done
}
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
# Runs a GoogleTest binary, then reports its counts as ctest does (for run()'s totals).
gtest() {
  local out status
  out=$(mktemp)
  "$@" >"$out" 2>&1
  status=$?
  cat "$out"
  awk '/^\[  PASSED  \] [0-9]+ test/ {p = $4} /^\[  FAILED  \] [0-9]+ test/ {f = $4}
       END {printf "%d tests failed out of %d\n", f, p + f}' "$out"
  rm -f "$out"
  return $status
}
build() {  # build DIR [cmake args...]: configure once, then build (with the tests: asked for, so a missing GoogleTest fails)
  local dir=$1; shift
  if [[ "$dir" == *wasm* ]]; then
    emcmake cmake -S . -B "$dir" -G Ninja -DMASKATTN_BUILD_TESTS=ON "$@" >/dev/null && cmake --build "$dir"
  else
    cmake -S . -B "$dir" -G Ninja -DMASKATTN_BUILD_TESTS=ON "$@" >/dev/null && cmake --build "$dir"
  fi
}

step "layers of src/: no include climbs (scripts/check-layers.sh)"
run bash -c 'if bash scripts/check-layers.sh; then echo "0 tests failed out of 1"; else echo "1 tests failed out of 1"; exit 1; fi'
step "lists only in their tables: dtypes, targets, builds (scripts/check-lists.mjs)"
run bash -c 'if node scripts/check-lists.mjs; then echo "0 tests failed out of 1"; else echo "1 tests failed out of 1"; exit 1; fi'

step "native build (Release): every x86 row of the target table (src/include/maskattn/targets.inc), run-time dispatch"
run build build/native -DCMAKE_BUILD_TYPE=Release -DMASKATTN_BUILD_BENCH=ON
step "native tests: every dispatch target the CPU has, the README example, the installed package"
run ctest --test-dir build/native --output-on-failure -j2

step "native build with AddressSanitizer + UndefinedBehaviorSanitizer"
# -g1: line tables only (the sanitizers' stack traces keep file:line); the full -g made this build
# 27% slower on a 2-core VM (317 s -> 231 s).
# MASKATTN_HOST_TARGETS_ONLY: only the kernels this CPU runs (the others' tests would skip; the
# Release build above compiles every row): on a Zen 3 no AVX-512, a quarter of the ASan build.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DMASKATTN_HOST_TARGETS_ONLY=ON)
run build build/asan "${sanitizer_flags[@]}" -DMASKATTN_SANITIZE=ON -DMASKATTN_BUILD_EXAMPLES=OFF
step "sanitizer tests"
# (gtest_host_executor, the threaded suites again through a host's pool, runs natively and under TSan.)
run env ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build/asan --output-on-failure -j2 -E 'installed_package_consumer|gtest_host_executor'

# The test files that run threads (TSan's build, and the threaded WebAssembly build's).
threaded_test_files="test_threads.cpp;test_executor.cpp;test_differential.cpp"
# ThreadSanitizer: the tests that run threads (test_threads.cpp: concurrent callers on shared
# inputs and a shared KV cache, thread-count invariance on every kernel; the target-parameterised
# ThreadCount tests). The whole suite takes about 3.5 minutes under TSan on 2 cores; this subset
# about one minute. Only the three files holding the filter's tests are compiled.
step "native build with ThreadSanitizer (build/tsan)"
run build build/tsan "${sanitizer_flags[@]}" -DMASKATTN_BUILD_EXAMPLES=OFF "-DMASKATTN_TEST_FILES=$threaded_test_files" \
  "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread"
# The per-target thread-count tests for the last target the build holds (ctest's per-target entries
# follow the table's order: the widest this CPU runs), on every kernel: the threading code is the
# same for every target, and each target's tests took 28 s under TSan (84 of the phase's 116 s).
# Natively and through a host's executor they run for every target.
tsan_target=$(ctest --test-dir build/tsan -N | sed -nE 's/.*Test +#[0-9]+: gtest_([a-z0-9]+)$/\1/p' | tail -1)
step "ThreadSanitizer tests: concurrent calls, a shared KV cache, 1/2/3/8 threads bitwise (every kernel of ${tsan_target:-?}), host executors"
run gtest env TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build/tsan/tests/maskattn_tests \
  --gtest_filter="Threads.*:Executor.*:Targets/*ThreadCount*/${tsan_target:-none}_*"
# The threaded suites again with a pool the test owns as the default executor, failing if maskattn's
# own pool starts a thread (the per-target Differential ThreadCount tests take this path natively, in
# ctest's gtest_host_executor; under TSan they would add 50 s). About 5 s.
step "ThreadSanitizer tests through a host's executor (MASKATTN_TEST_EXECUTOR=1)"
run gtest env MASKATTN_TEST_EXECUTOR=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  build/tsan/tests/maskattn_tests --gtest_filter='Threads.*:Executor.*'

# libFuzzer (clang-19, ASan + UBSan): bytes -> shapes, strides, options, masks, caches; every native
# target and kernel against the float64 reference; hostile input must get ArgumentError.
step "fuzzing for a minute on every core (scripts/fuzz.sh; findings in build/fuzz/findings/)"
run bash -c 'if bash scripts/fuzz.sh 60; then echo "0 tests failed out of 1"; else echo "1 tests failed out of 1"; exit 1; fi'

step "aarch64 cross build (kernels scalar, neon64) with aarch64-linux-gnu-g++"
run build build/aarch64 -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" -DMASKATTN_BUILD_BENCH=ON \
  -DMASKATTN_TESTS_ONE_KERNEL_TARGETS=scalar
step "aarch64 tests under qemu-aarch64: the suite on neon64, the prefill kernel's share on scalar, the installed package"
run ctest --test-dir build/aarch64 --output-on-failure -j2

# The same build directories as scripts/build-wasm.sh (which then only relinks the npm modules): the
# builds of js/builds.js whose ctest column is set (bench: with the micro-kernel check).
# simd-relaxed: emcc on clang-19 (f32x4.relaxed_madd); simd-threads: pthreads, the pool on workers.
# The target-independent test files (tests/CMakeLists.txt: argument checks and API logic) are
# compiled and run in the simd build only (its kernels are simd128 and the scalar one, compiled as
# in the scalar build); a 'threaded' build compiles only the files that run threads; every other
# build runs the rest.
# The modules only the JavaScript suites test (ctest false in js/builds.js) build meanwhile in the
# background, at low priority, into the same folders scripts/build-wasm.sh uses: the C++ builds'
# configure steps and links, and the docs' commands, leave a core idle (the docs' commands used
# 84% of two), and scripts/test-js.sh then finds them built.
js_only_builds=$(node scripts/builds.mjs | awk -F'\t' '$4 == "no" {print $2}' | tr '\n' ' ')
js_only_log=$(mktemp)
MASKATTN_WASM_BUILDS="$js_only_builds" nice -n 10 bash scripts/build-wasm.sh >"$js_only_log" 2>&1 &
js_only_pid=$!
independent_ran=no
while IFS=$'\t' read -r _ mode cmake_flags ctest _ _ <&3; do
  [ "$ctest" = no ] && continue
  read -ra flags <<<"$cmake_flags"
  bench=$([ "$ctest" = bench ] && echo ON || echo OFF)
  independent=$([ "$mode" = simd ] && echo ON || echo OFF)
  test_files=$([ "$ctest" = threaded ] && echo "$threaded_test_files" || echo "")
  [ "$independent" = ON ] && independent_ran=yes
  step "WebAssembly build ($mode) with Emscripten"
  run build build/wasm-$mode -DCMAKE_BUILD_TYPE=Release "${flags[@]}" -DMASKATTN_BUILD_TESTS=ON -DMASKATTN_BUILD_EXAMPLES=ON \
    -DMASKATTN_BUILD_BENCH=$bench -DMASKATTN_TESTS_TARGET_INDEPENDENT=$independent "-DMASKATTN_TEST_FILES=$test_files"
  step "WebAssembly tests ($mode) under Node"
  run ctest --test-dir build/wasm-$mode --output-on-failure -j2
done 3< <(node scripts/builds.mjs)
[ "$independent_ran" = yes ] || run bash -c 'echo "test.sh: no WebAssembly build named simd ran the target-independent tests (js/builds.js)"; exit 1'

# README.md's and docs/*.md's shell blocks as written, in a clean copy of the checkout with a user's
# environment: the library installed natively and as the Emscripten package (simd, simd-relaxed,
# simd-threads), examples/embedding and the C++ quick start built against them with emcmake, run
# under Node and checked against the native program; every block run or marked not run.
step "the docs' commands as written (tests/docs/commands.test.mjs), the Emscripten package's consumers against native"
run bash -c 'node --test --test-reporter=spec tests/docs/commands.test.mjs 2>&1 | tee "$0"; s=${PIPESTATUS[0]}
  grep -E "^ℹ (pass|fail) " "$0" | sed "s/^ℹ /# /"; exit $s' "$(mktemp)"

# (Its failure shows again, and counts, when scripts/test-js.sh builds every module.)
wait "$js_only_pid" || echo "the background build of $js_only_builds failed:"
cat "$js_only_log"

if [ -f scripts/test-js.sh ]; then
  step "JavaScript package, types and browser tests"
  run bash scripts/test-js.sh
fi

phase_times
echo
echo "$passed passed, $failed failed (in $(date -u -d @$((SECONDS - started)) +%M:%S))"
[ "$failed" -eq 0 ]
