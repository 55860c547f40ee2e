#!/usr/bin/env bash
# The decode kernel's Q·Kᵀ loops, which stream the K rows, hold prefetch instructions on every
# target of the library given (src/kernel/simd.hpp, prefetch_row: GCC once deleted these calls
# without a word, and the quantized decode step waited on memory for it).
# Usage: [OBJDUMP=...] check_prefetch.sh path/to/libmaskattn.a target... (the build's targets: each
# must show up; OBJDUMP: the toolchain's objdump, for a cross build).
set -euo pipefail
lib=${1:?usage: check_prefetch.sh path/to/libmaskattn.a target...}
shift
[ "$#" -gt 0 ] || { echo "no targets given"; exit 1; }
objdump=${OBJDUMP:-objdump}
command -v "$objdump" >/dev/null || { echo "$objdump not found (binutils)"; exit 1; }
# One line per target and kind of Q·Kᵀ function (float or quantized keys): its prefetch count.
counts=$("$objdump" -d --no-show-raw-insn -C "$lib" | awk '
  /^[0-9a-f]+ </ {
    fn = ""
    if ($0 ~ /DecodeAttention<.*>::qk_block(_quant)?</ && match($0, /maskattn::detail::[a-z0-9_]+::DecodeAttention/)) {
      fn = substr($0, RSTART + 18, RLENGTH - 35) (index($0, "qk_block_quant<") ? " quantized" : " float")
      seen[fn] += 0
    }
    next
  }
  fn != "" && /prefetch|prfm/ { seen[fn]++ }  # x86 prefetcht0, aarch64 prfm
  END { for (f in seen) printf "%-22s %d prefetch instructions\n", f, seen[f] }' | sort)
echo "$counts"
fail=0
for target in "$@"; do
  grep -q "^$target quantized " <<<"$counts" || { echo "FAIL: no quantized Q·Kᵀ of target $target in $lib"; fail=1; }
done
if grep -q " 0 prefetch" <<<"$counts"; then echo "FAIL: a Q·Kᵀ loop above holds no prefetch instruction"; fail=1; fi
[ "$fail" = 0 ] && echo "ok: every decode Q·Kᵀ loop requests rows ahead"
exit "$fail"
