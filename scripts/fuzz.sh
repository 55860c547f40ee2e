#!/usr/bin/env bash
# Builds the libFuzzer harness (tests/fuzz: clang-19, -fsanitize=fuzzer,address,undefined; every
# native target, both kernels, against the float64 reference) and runs it for a bounded time on the
# seed corpus tests/fuzz/corpus plus what earlier runs found (build/fuzz/corpus).
#   scripts/fuzz.sh [seconds]      default 120; findings are written to build/fuzz/findings/
# One fuzzing process per core (MASKATTN_FUZZ_WORKERS, default nproc), each for that many seconds,
# all adding to the same corpus folder: the harness is single-threaded, so on 2 cores a minute
# runs as many inputs as two minutes of one process.
# The seeds are fixed (MASKATTN_FUZZ_SEED, default 1; worker w takes seed + w) so that the test
# command's bounded run explores the same inputs on every machine with the same core count, and a
# CI run is never red by the luck of a draw; MASKATTN_FUZZ_SEED=0 lets libFuzzer pick each one
# (longer exploratory runs). MASKATTN_FUZZ_DIR names the build folder (default build/fuzz; builds
# in parallel each need their own).
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
workers=${MASKATTN_FUZZ_WORKERS:-$(nproc)}
base_seed=${MASKATTN_FUZZ_SEED:-1}
pids=() logs=()
for ((w = 0; w < workers; ++w)); do
  seed=$([ "$base_seed" = 0 ] && echo 0 || echo $((base_seed + w)))
  log="$dir/last-run-$w.log"
  logs+=("$log")
  "$dir/maskattn_fuzz" -seed="$seed" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/findings/" "$dir/corpus" tests/fuzz/corpus >"$log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
for log in "${logs[@]}"; do
  grep -E "maskattn fuzz finding|case:|ERROR:|runtime error|SUMMARY" "$log" | head -20 || true
done
execs=$(cat "${logs[@]}" | grep -Eo 'stat::number_of_executed_units: [0-9]+' | awk '{s += $2} END {print s + 0}')
cov=$(grep -hE '^#[0-9]+.*cov: ' "${logs[@]}" | grep -Eo 'cov: [0-9]+ ft: [0-9]+' | sort -t' ' -k2,2n | tail -1 || true)
echo "fuzz: $execs executions by $workers processes in ${seconds} s, best ${cov:-coverage unknown}, corpus $(ls "$dir/corpus" | wc -l) units, status $status"
exit "$status"
