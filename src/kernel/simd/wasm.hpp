// The WebAssembly SIMD128 row's primitives (kernel/simd.hpp says what a file of kernel/simd/
// defines). xsimd 8.1 has no wasm architecture: the row's arch is xsimd's sse4_1, which reaches
// SIMD128 through Emscripten's SSE translation headers, so the 128-bit SSE forms serve here too
// (kernel/simd/sse.hpp); where SIMD128 has a better instruction than the SSE translation, it is
// used directly. The relaxed builds add -mrelaxed-simd (relaxed_madd for fma).
#pragma once

#include "base/arch_namespace.hpp"
#include "kernel/simd.hpp"
#include "kernel/simd/sse.hpp"

#include <cstdint>

#include <wasm_simd128.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// Emscripten's SSE headers lower these to i32x4.shuffle (the prefill kernel's WebAssembly tuning
// does not call it, see pack_rows there).
inline void transpose4x4(const float* const rows[4], float* dst, int64_t dst_stride) {
  sse::transpose4x4(rows, dst, dst_stride);
}

// dst[m * dst_stride + i] = rows[i][m] for i, m < N, N a multiple of 4: 4x4 blocks.
template <int N>
inline void transpose_block(const float* const rows[N], float* dst, int64_t dst_stride) {
  transpose_by_4x4<N>(rows, dst, dst_stride, sse::transpose4x4);
}

// Bit j set where p[j] != 0, for j < n <= 64 (bytes past n are not read): a row of a boolean mask
// as the prefill kernel's tile bits, 16 bytes a compare and i8x16.bitmask.
inline uint64_t nonzero_byte_bits(const uint8_t* p, int64_t n) {
  uint64_t bits = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    bits |= uint64_t(wasm_i8x16_bitmask(wasm_i8x16_ne(wasm_v128_load(p + j), wasm_i8x16_splat(0)))) << j;
  for (; j < n; ++j) bits |= uint64_t(p[j] != 0) << j;
  return bits;
}

// out[j] = 0 where bytes[j] == 0, for j < n rounded down to 16; returns how many were done (the
// caller's loop does the rest). clang-14 keeps that loop scalar for SIMD128 (measured: the gather
// was 16% of #6 in Node): 16 mask bytes become four lanes-wide masks that clear `out`.
inline int64_t clear_where_zero(const uint8_t* __restrict bytes, float* __restrict out, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const v128_t zero = wasm_i8x16_eq(wasm_v128_load(bytes + j), wasm_i8x16_splat(0));
    const v128_t lo = wasm_i16x8_extend_low_i8x16(zero), hi = wasm_i16x8_extend_high_i8x16(zero);
    const v128_t m[4] = {wasm_i32x4_extend_low_i16x8(lo), wasm_i32x4_extend_high_i16x8(lo),
                         wasm_i32x4_extend_low_i16x8(hi), wasm_i32x4_extend_high_i16x8(hi)};
    for (int q = 0; q < 4; ++q)
      wasm_v128_store(out + j + 4 * q, wasm_v128_andnot(wasm_v128_load(out + j + 4 * q), m[q]));
  }
  return j;
}

template <class Arch>
struct Simd : SimdBatch<Arch, Simd<Arch>> {
  using B = SimdBatch<Arch, Simd<Arch>>;
  using V = typename B::V;
  using M = typename B::M;
  using I = typename B::I;
  static constexpr int W = B::W;
  static_assert(W == 4, "SIMD128 is 4 float lanes");
  using B::load;
  // Vector registers the tiles may use. WebAssembly runs on x64's 16 XMM registers, of which V8
  // keeps one as scratch, and without FMA every product needs a temporary: budget fewer there.
  static constexpr int kRegisters = 12;

  static V load(const uint16_t* p) { return B::from_half_bits(I(sse::halves4(p))); }
  static V load(const Bf16* p) { return V(sse::bf16s4(reinterpret_cast<const uint16_t*>(p))); }

  // A row of 16-bit values 8 at a time: one 128-bit load becomes two float vectors (the decode
  // kernel's in-order rows, kernel/decode_in_order.hpp). Halves take a short form, exact for every
  // half but those of exponent 31 (infinity, NaN), which it reads as finite values of 2^16 and
  // above; `seen` collects whether any came by, and the caller then takes load()'s exact conversion
  // for what they touched. load() is ten SIMD128 operations per 4 halves; this is four, plus two
  // per 8 for the check.
  static constexpr bool kLoads8 = true;
  using Seen = v128_t;
  static Seen seen_none() { return wasm_i16x8_splat(0); }
  static bool any_exponent31(const Seen& seen) {
    // Each lane holds the largest half seen, with its sign bit set: 0xfc00 and above is exponent 31.
    return wasm_v128_any_true(wasm_u16x8_gt(seen, wasm_i16x8_splat(int16_t(0xfbff))));
  }
  static void load8(const uint16_t* p, V* out, Seen& seen) {
    const v128_t h = wasm_v128_load(p), zero = wasm_i16x8_splat(0);
    seen = wasm_u16x8_max(seen, wasm_v128_or(h, wasm_i16x8_splat(int16_t(0x8000))));
    // Each half in its int32 lane's upper 16 bits; an arithmetic shift by 3 puts its exponent and
    // mantissa where a float's are (sign bit kept, copied into the three bits the and clears), and
    // 2^112 rebiases the exponent from 15 to 127 (subnormal halves become subnormal floats first:
    // exact too).
    const v128_t mask = wasm_i32x4_splat(int32_t(0x8fffe000u));
    const v128_t lo = wasm_i16x8_shuffle(zero, h, 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t hi = wasm_i16x8_shuffle(zero, h, 4, 12, 5, 13, 6, 14, 7, 15);
    const v128_t scale = wasm_f32x4_splat(0x1p112f);
    out[0] = V(__m128(wasm_f32x4_mul(wasm_v128_and(wasm_i32x4_shr(lo, 3), mask), scale)));
    out[1] = V(__m128(wasm_f32x4_mul(wasm_v128_and(wasm_i32x4_shr(hi, 3), mask), scale)));
  }
  // bfloat16: one shuffle per 4 values, each in its float's upper half; exact for all, `seen` unused.
  static void load8(const Bf16* p, V* out, Seen&) {
    const v128_t b = wasm_v128_load(p), zero = wasm_i16x8_splat(0);
    out[0] = V(__m128(wasm_i16x8_shuffle(zero, b, 0, 8, 1, 9, 2, 10, 3, 11)));
    out[1] = V(__m128(wasm_i16x8_shuffle(zero, b, 4, 12, 5, 13, 6, 14, 7, 15)));
  }
  static M bit_set(const I& w, int bit) { return M(sse::bit_set4(w, bit)); }
  static uint32_t lane_bits(const M& m) { return uint32_t(_mm_movemask_ps(m)); }
#if defined(__wasm_relaxed_simd__)
  // Relaxed SIMD: f32x4.relaxed_madd, a fused multiply-add where the CPU has one (x64 with FMA3,
  // ARM64), mul + add elsewhere; either way within the contract's error bound. (xsimd's fma on
  // SIMD128 is always mul + add.) The last bits may differ between engines and CPUs. Relaxed
  // min/max/laneselect are not used: their NaN and -0 results are engine-defined.
  static V fma(const V& a, const V& b, const V& c) {
    return V(__m128(wasm_f32x4_relaxed_madd(v128_t(__m128(a)), v128_t(__m128(b)), v128_t(__m128(c)))));
  }
#else
  static V fma(const V& a, const V& b, const V& c) { return xsimd::fma(a, b, c); }
#endif
  // x < acc ? acc : x lane-wise: a running maximum that takes a NaN `x` (the comparison is false for
  // NaN); a NaN already in `acc` may be replaced (the row sum carries NaN, not the max).
  // f32x4.pmax(x, acc) is this expression in one instruction (f32x4.max and Emscripten's
  // _mm_max_ps cost a compare and a select).
  static V max_keep_nan(const V& acc, const V& x) {
    return V(__m128(wasm_f32x4_pmax(v128_t(__m128(x)), v128_t(__m128(acc)))));
  }
  static V exponent_scale(const V& t) { return B::exponent_scale_generic(t); }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
