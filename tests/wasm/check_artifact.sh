#!/usr/bin/env bash
# Checks a wasm artifact really is what its build claims (no silent fallback):
#   simd   - the kernel is in SIMD128 (many f32x4 ops) and the cvt fix is in (i32x4.trunc_sat);
#   scalar - no v128 instruction at all, so engines without SIMD128 can run it;
#   relaxed - a SIMD128 kernel whose multiply-adds are f32x4.relaxed_madd (the relaxed-SIMD build).
set -euo pipefail
wasm="$1" mode="$2"
wat=$(wasm2wat --enable-all "$wasm")
f32x4=$(grep -c 'f32x4\.' <<<"$wat" || true)
v128=$(grep -cE 'v128|[if](32|64)x[0-9]' <<<"$wat" || true)
echo "$wasm: $f32x4 f32x4 instructions, $v128 SIMD instructions in all"
case "$mode" in
  simd)
    [ "$f32x4" -ge 100 ] || { echo "FAIL: expected a SIMD128 kernel (>= 100 f32x4 ops)"; exit 1; }
    grep -q 'i32x4.trunc_sat_f32x4_s' <<<"$wat" || { echo "FAIL: float->int fix missing"; exit 1; }
    ;;
  scalar)
    [ "$v128" -eq 0 ] || { echo "FAIL: scalar build contains SIMD instructions"; exit 1; }
    ;;
  relaxed)
    [ "$f32x4" -ge 100 ] || { echo "FAIL: expected a SIMD128 kernel (>= 100 f32x4 ops)"; exit 1; }
    madd=$(grep -c 'f32x4\.relaxed_madd' <<<"$wat" || true)
    echo "$madd f32x4.relaxed_madd"
    [ "$madd" -ge 50 ] || { echo "FAIL: expected fused multiply-adds (f32x4.relaxed_madd) in the kernel"; exit 1; }
    ;;
  *) echo "usage: $0 WASM simd|scalar|relaxed"; exit 2 ;;
esac
echo PASS
