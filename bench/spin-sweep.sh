#!/usr/bin/env bash
# The spin policy's figures (docs/embedding.md): maskattn's pool at several ThreadPoolConfig::spin_us
# against oneDNN in the same process, 2 threads, cases #1, #6 and #11 (encoder), with a 1 ms pause
# before every call (--gap-ms 1 --warm 0) and back to back (--gap-ms 0), plus the CPU time burned in
# the 20 ms after a call. GNU OpenMP keeps its default spin (GOMP_SPINCOUNT=300000; the bench
# otherwise shortens it). Prints one line per run; medians are taken over the repetitions.
#   bench/spin-sweep.sh BENCH_BINARY [REPETITIONS] [SPIN_US...]
set -euo pipefail
bench=$1 reps=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
spins=("$@")
[ ${#spins[@]} -gt 0 ] || spins=(0 200 1000 2000 5000)
for rep in $(seq "$reps"); do
  for spin in "${spins[@]}"; do
    for mode in pause back-to-back; do
      gap=(--gap-ms 1 --warm 0)
      [ $mode = pause ] || gap=(--gap-ms 0)
      GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-300000} "$bench" --case 1,6,11 --threads 2 --peers onednn "${gap[@]}" \
        --budget 1.5 --spin-us "$spin" --idle-cpu 2>/dev/null |
        awk -v spin="$spin" -v mode="$mode" -v rep="$rep" '
          /^#[0-9]+ +idle CPU/ { idle[$1 "/" $11] = $13 }
          /^#[0-9]+ / && !/idle/ { c = $1 }
          /^ +maskattn +\|/ { ours[c] = $3 }
          /^ +onednn +\|/ { peer[c] = $3 }
          /^ +ratio/ { ratio[c] = $7 }
          END { for (k in ratio) printf "rep %s spin_us %5s %-12s %-4s maskattn %7.3f ms onednn %7.3f ms ratio %6s idle_us maskattn %5s onednn %5s\n",
                  rep, spin, mode, k, ours[k], peer[k], ratio[k], idle[k "/maskattn"], idle[k "/onednn"] }'
    done
  done
done
# maskattn alone (no peer in the process: no other library's spinning threads), 1 and 2 threads.
for rep in $(seq "$reps"); do
  for spin in "${spins[@]}"; do
    for mode in pause back-to-back; do
      gap=(--gap-ms 1 --warm 0)
      [ $mode = pause ] || gap=(--gap-ms 0)
      "$bench" --case 1,6,11 --threads 1,2 --peers none "${gap[@]}" --budget 1.5 --spin-us "$spin" --idle-cpu 2>/dev/null |
        awk -v spin="$spin" -v mode="$mode" -v rep="$rep" '
          /^#[0-9]+ +idle CPU/ && $12 == "2T" { idle[$1] = $13 }
          /^#[0-9]+ / && !/idle/ { c = $1 }
          /^ +maskattn +\|/ { one[c] = $3; two[c] = $7 }
          END { for (k in one) printf "alone rep %s spin_us %5s %-12s %-4s maskattn 1T %7.3f ms 2T %7.3f ms idle_us 2T %5s\n",
                  rep, spin, mode, k, one[k], two[k], idle[k] }'
    done
  done
done
