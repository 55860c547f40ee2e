#!/usr/bin/env bash
# Builds the libFuzzer harness (tests/fuzz: clang-19, -fsanitize=fuzzer,address,undefined; every
# native target, both kernels, against the float64 reference) and runs it for a bounded time on the
# seed corpus tests/fuzz/corpus plus what earlier runs found (build/fuzz/corpus).
#   scripts/fuzz.sh [seconds]      default 120; findings are written to build/fuzz/findings/
# The seed is fixed (MASKATTN_FUZZ_SEED, default 1) so that the test command's bounded run explores
# the same inputs on every machine and a CI run is never red by the luck of a draw;
# MASKATTN_FUZZ_SEED=0 lets libFuzzer pick one (longer exploratory runs). MASKATTN_FUZZ_DIR names
# the build folder (default build/fuzz; builds in parallel each need their own).
# Exit status 0 when the run ends with no finding. Replay a finding with
#   MASKATTN_FUZZ_PRINT=1 build/fuzz/maskattn_fuzz build/fuzz/findings/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
dir=${MASKATTN_FUZZ_DIR:-build/fuzz}
cxx=$(command -v clang++-19 || true)
if [ -z "$cxx" ]; then
  echo "fuzz.sh: clang++-19 not found (apt-get install clang-19 libclang-rt-19-dev)" >&2
  exit 1
fi
cmake -S tests/fuzz -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$dir" -j2 2>&1 | grep -Ev "^\[|unknown warning option '-Wno-maybe-uninitialized'|^[0-9]+ warning generated" || true
mkdir -p "$dir/corpus" "$dir/findings"
# Known findings (tests/fuzz/ubsan.supp) are skipped; anything else halts the run.
export UBSAN_OPTIONS="suppressions=$PWD/tests/fuzz/ubsan.supp:halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
log="$dir/last-run.log"
status=0
"$dir/maskattn_fuzz" -seed="${MASKATTN_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$dir/findings/" "$dir/corpus" tests/fuzz/corpus >"$log" 2>&1 || status=$?
grep -E "maskattn fuzz finding|case:|ERROR:|runtime error|SUMMARY" "$log" | head -20 || true
execs=$(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" | awk '{print $2}')
cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 | grep -Eo 'cov: [0-9]+ ft: [0-9]+' || true)
echo "fuzz: ${execs:-?} executions in ${seconds} s, ${cov:-coverage unknown}, corpus $(ls "$dir/corpus" | wc -l) units, status $status"
exit "$status"
