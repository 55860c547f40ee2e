// The few vector primitives the kernel needs, in one place (the escape hatch from xsimd is small
// and named). Simd<Arch> wraps xsimd::batch<float, Arch>; Simd<ScalarArch> is the same interface on
// plain float, so one kernel source also builds for engines without SIMD.
//
// This header holds what every target shares. What an instruction set does its own way (half and
// bfloat16 loads, tile bits in lanes, fused multiply-add, transposes, a boolean mask row as bits,
// its register budget) is one file of kernel/simd/ per instruction set, the `simd` column of the
// target's row in the target table (src/include/maskattn/targets.inc): the target's translation unit
// defines MASKATTN_SIMD to it (src/dispatch/kernel.cpp.in), as it does MASKATTN_INT_DOT; code built
// outside a kernel translation unit gets the plain-float file. Each file defines Simd<Arch> on
// SimdBatch below, transpose4x4, transpose_block<N> and nonzero_byte_bits.
//
// exp2 is our own: the magic-number rounding trick needs no float->int conversion, which
// Emscripten 3.1.6 lowers to a scalar loop (docs/development.md, "Toolchain notes"), so it stays in
// SIMD everywhere.
#pragma once

#include "base/arch_namespace.hpp"
#include "base/compiler.hpp"
#include "kernel/half.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <xsimd/xsimd.hpp>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

struct ScalarArch {
  static constexpr const char* name() { return "scalar"; }
};

namespace exp2_poly {
// 2^r on [-0.5, 0.5], least-squares fit of the relative error (max 1.6e-8, below fp32 rounding).
constexpr float c1 = 6.931471825e-01f, c2 = 2.402264774e-01f, c3 = 5.550329015e-02f,
                c4 = 9.618373588e-03f, c5 = 1.339984825e-03f, c6 = 1.537070348e-04f;
// x + kRoundMagic rounds x to an integer k (1.5 * 2^23: the sum's ulp is 1) and leaves k + 127, the
// biased exponent of 2^k, in its low mantissa bits: shifting those bits by 23 gives 2^k itself,
// without an integer add of the bias (one vector instruction fewer per exponential).
constexpr float kRoundMagic = 12582912.0f + 127.0f;
constexpr float kFlushBelow = -127.0f;      // 2^x for x <= -127 returns exactly 0
}  // namespace exp2_poly

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// An element of K or V as float: float as is, uint16_t as IEEE half bits, Bf16 by a shift.
inline float element(float x) { return x; }
inline float element(uint16_t h) { return half_bits_to_float(h); }
inline float element(Bf16 b) { return bf16_bits_to_float(b.bits); }

// Always inlined, both: GCC 12 deletes a call it does not inline (a function holding only
// prefetches counts as free of side effects), and so the quantized Q·Kᵀ of every target requested
// no K rows at all (objdump; tests/check_prefetch.sh now checks the kernels hold them). With the
// calls back (Zen 5, 1 thread, caches from DRAM) the GQA q8 decode step went 0.85-0.91 -> 0.60-0.63 ms.
#define MASKATTN_PREFETCH_INLINE MASKATTN_ALWAYS_INLINE inline

// Requests the cache lines of `bytes` bytes at p (no instructions where the compiler has no
// prefetch: kSoftwarePrefetch, base/compiler.hpp).
MASKATTN_PREFETCH_INLINE void prefetch_bytes(const void* p, int64_t bytes) {
  for (int64_t x = 0; x < bytes; x += 64) MASKATTN_PREFETCH(static_cast<const char*>(p) + x);
}

// One K or V row's lines, unrolled for rows up to 192 bytes (quantized rows, requested per key:
// there the loop's own instructions measured dearer than the prefetches).
MASKATTN_PREFETCH_INLINE void prefetch_row(const void* row, int64_t bytes) {
  if (bytes > 192) return prefetch_bytes(row, bytes);
  const char* c = static_cast<const char*>(row);
  MASKATTN_PREFETCH(c);
  MASKATTN_PREFETCH(c + 64);
  if (bytes > 128) MASKATTN_PREFETCH(c + 128);
}

// Bits [a, b) of a 64-bit word, the bounds clamped to [0, 64]: a key interval over a 64-key tile.
inline uint64_t range_bits(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 0);
  b = std::min<int64_t>(b, 64);
  if (b <= a) return 0;
  const uint64_t below_b = b == 64 ? ~uint64_t(0) : (uint64_t(1) << b) - 1;
  return below_b & ~((uint64_t(1) << a) - 1);
}

// dst[m * dst_stride + i] = rows[i][m] for i, m < 4, one element at a time: the transpose of a
// target without 4x4 shuffles of its own.
inline void transpose4x4_loop(const float* const rows[4], float* dst, int64_t dst_stride) {
  for (int m = 0; m < 4; ++m)
    for (int i = 0; i < 4; ++i) dst[m * dst_stride + i] = rows[i][m];
}

// An N x N block (N a multiple of 4) as 4x4 blocks through Transpose4(rows, dst, stride).
template <int N, class Transpose4>
inline void transpose_by_4x4(const float* const rows[N], float* dst, int64_t dst_stride, Transpose4&& transpose4) {
  static_assert(N % 4 == 0, "blocks of 4");
  for (int i = 0; i < N; i += 4)
    for (int m = 0; m < N; m += 4) {
      const float* const quad[4] = {rows[i] + m, rows[i + 1] + m, rows[i + 2] + m, rows[i + 3] + m};
      transpose4(quad, dst + m * dst_stride + i, dst_stride);
    }
}

template <class Arch>
struct Simd;

// The vector version exists only where xsimd has a vector architecture (not in a scalar wasm build).
#ifndef XSIMD_NO_SUPPORTED_ARCHITECTURE
// What every vector target's Simd<Arch> shares: xsimd's operations, and the generic forms of the
// rest, which a target's file uses where it has no instruction of its own. Self is that Simd<Arch>
// (exp2 calls its fma, max_keep_nan and exponent_scale).
template <class Arch, class Self>
struct SimdBatch {
  using V = xsimd::batch<float, Arch>;
  using M = xsimd::batch_bool<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  static constexpr int W = int(V::size);
  // Whether the target has load8 (8 16-bit values per load, kernel/simd/wasm.hpp); the others load W.
  static constexpr bool kLoads8 = false;
  // Whether the target reads bfloat16 rows 2W at a time into two vectors in an order of its own,
  // pair order (load_bf16_pair, load_pair_order, store_pair_order: kernel/simd/x86.hpp):
  // one wide load and one instruction per vector, where the in-order load widens then shifts.
  static constexpr bool kBf16Pairs = false;

  static V load(const float* p) { return V::load_unaligned(p); }
  static void store(float* p, const V& x) { x.store_unaligned(p); }
  static V splat(float x) { return V(x); }
  // W IEEE halves to W floats through memory and integer unpacking (no conversion instruction).
  static V load_halves(const uint16_t* p) {
    alignas(64) int32_t bits[W];
    for (int i = 0; i < W; ++i) bits[i] = p[i];
    return from_half_bits(I::load_aligned(bits));
  }
  // W bfloat16 values to W floats through memory: each is a float's upper half.
  static V load_bf16s(const uint16_t* u) {
    alignas(64) int32_t bits[W];
    for (int i = 0; i < W; ++i) bits[i] = int32_t(uint32_t(u[i]) << 16);
    return xsimd::bitwise_cast<V>(I::load_aligned(bits));
  }
  // The vector form of half_bits_to_float (lanes hold the 16 bits zero-extended).
  static V from_half_bits(const I& h) {
    const I em = h & I(0x7fff), sign = (h & I(0x8000)) << 16;
    const V scaled = xsimd::bitwise_cast<V>(em << 13) * V(0x1p112f);
    // 2^16 and above only comes from exponent 31: infinity or NaN, whose bits are set directly.
    const V special = xsimd::bitwise_cast<V>((em << 13) | I(0x7f800000));
    const V f = xsimd::select(scaled >= V(65536.0f), special, scaled);
    return xsimd::bitwise_cast<V>(xsimd::bitwise_cast<I>(f) | sign);
  }
  // Tile bits in lanes (the prefill kernel's element-wise masks, kernel/prefill_kernel.hpp): the
  // lanes whose int32 has bit `bit` set (a target's file has the one- or two-instruction form), and
  // bit r = lane r of a mask.
  static I load_bits(const uint32_t* p) { return I::load_unaligned(reinterpret_cast<const int32_t*>(p)); }
  static M bit_set_generic(const I& w, int bit) { return xsimd::to_float(w & I(int32_t(1u << bit))) != V(0.0f); }
  static uint32_t lane_bits_generic(const M& m) {
    alignas(64) bool lanes[W];
    m.store_aligned(lanes);
    uint32_t bits = 0;
    for (int i = 0; i < W; ++i) bits |= uint32_t(lanes[i]) << i;
    return bits;
  }
  static V select(const M& m, const V& a, const V& b) { return xsimd::select(m, a, b); }
  static V abs(const V& x) { return xsimd::abs(x); }
  static V tanh(const V& x) { return xsimd::tanh(x); }
  static bool any(const M& m) { return xsimd::any(m); }
  static V iota() {
    alignas(64) float lanes[W];
    for (int i = 0; i < W; ++i) lanes[i] = float(i);
    return V::load_aligned(lanes);
  }
  // The lane-wise maximum, with whatever NaN rule the target's max instruction has (x86 maxps keeps
  // the second operand): for callers whose NaN reaches the result another way.
  static V max(const V& a, const V& b) { return xsimd::max(a, b); }
  static float hmax(const V& x) {
    alignas(64) float lanes[W];
    x.store_aligned(lanes);
    float m = lanes[0];
    // A NaN lane may be dropped (this is a maxss chain); NaN reaches the row through its sum.
    for (int i = 1; i < W; ++i) m = lanes[i] < m ? m : lanes[i];
    return m;
  }
  // Lane x of the result is the sum of acc[x]'s lanes: W dot products folded at once (the decode
  // kernel's Q·Kᵀ). xsimd's avx512f version needs AVX512DQ, which the avx512 target requires.
  static V reduce_lanes(const V* acc) {
    if constexpr (W == 16) {
      // xsimd 8.1.0's avx512f haddp returns its lanes in the order 0 1 4 5 2 3 6 7 8 9 12 13 10 11
      // 14 15 (measured; the order is its own inverse), so feed it the rows in that order.
      const V in[16] = {acc[0], acc[1], acc[4],  acc[5],  acc[2],  acc[3],  acc[6],  acc[7],
                        acc[8], acc[9], acc[12], acc[13], acc[10], acc[11], acc[14], acc[15]};
      return xsimd::haddp(in);
    } else {
      return xsimd::haddp(acc);
    }
  }
  // Through memory: xsimd 8.1's avx512f hadd needs AVX512DQ.
  static float hsum(const V& x) {
    alignas(64) float lanes[W];
    x.store_aligned(lanes);
    float s = 0;
    for (int i = 0; i < W; ++i) s += lanes[i];
    return s;
  }
  // 2^k from t's low mantissa bits (exp2): shifting them by 23 moves them into the exponent field.
  static V exponent_scale_generic(const V& t) { return xsimd::bitwise_cast<V>(xsimd::bitwise_cast<I>(t) << 23); }

  // 2^x for x <= 127, exact 0 for x <= -127, NaN for NaN.
  static V exp2(const V& x) {
    using namespace exp2_poly;
    const V xc = Self::max_keep_nan(V(kFlushBelow), x);
    const V t = xc + V(kRoundMagic);
    const V r = xc - (t - V(kRoundMagic));  // r in [-0.5, 0.5]
    // Horner: each step's multiply is on the dependency chain, where a fused multiply-add's
    // shorter latency pays even on CPUs whose separate add pipes make mul + add as fast as FMA
    // for accumulations (the relaxed-SIMD build's fma).
    V p = V(c6);
    p = Self::fma(p, r, V(c5));
    p = Self::fma(p, r, V(c4));
    p = Self::fma(p, r, V(c3));
    p = Self::fma(p, r, V(c2));
    p = Self::fma(p, r, V(c1));
    p = Self::fma(p, r, V(1.0f));
    // t's low mantissa bits hold k + 127 (k = round(x)); shifting by 23 moves them into the
    // exponent field, and the bits above them out (k + 127 = 0 gives +0).
    return p * Self::exponent_scale(t);
  }
};
#endif

template <>
struct Simd<ScalarArch> {
  using V = float;
  using M = bool;
  using I = int32_t;
  static constexpr int W = 1;
  static constexpr int kRegisters = 16;
  static constexpr bool kLoads8 = false;
  static constexpr bool kBf16Pairs = false;

  static V load(const float* p) { return *p; }
  static void store(float* p, V x) { *p = x; }
  static V load(const uint16_t* p) { return half_bits_to_float(*p); }
  static V load(const Bf16* p) { return bf16_bits_to_float(p->bits); }
  static V splat(float x) { return x; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V select(M m, V a, V b) { return m ? a : b; }
  static V abs(V x) { return std::fabs(x); }
  static V tanh(V x) { return std::tanh(x); }
  static bool any(M m) { return m; }
  static I load_bits(const uint32_t* p) { return int32_t(*p); }
  static M bit_set(I w, int bit) { return (uint32_t(w) >> bit) & 1u; }
  static uint32_t lane_bits(M m) { return m ? 1u : 0u; }
  static V iota() { return 0.0f; }
  static V max_keep_nan(V acc, V x) { return x < acc ? acc : x; }
  static V max(V a, V b) { return a < b ? b : a; }
  static float hmax(V x) { return x; }
  static float hsum(V x) { return x; }
  static V reduce_lanes(const V* acc) { return acc[0]; }
  static V exp2(V x) {
    using namespace exp2_poly;
    const float xc = x < kFlushBelow ? kFlushBelow : x;
    const float t = xc + kRoundMagic;
    const float r = xc - (t - kRoundMagic);
    float p = c6;
    p = p * r + c5; p = p * r + c4; p = p * r + c3; p = p * r + c2; p = p * r + c1; p = p * r + 1.0f;
    int32_t tb;
    std::memcpy(&tb, &t, 4);
    const uint32_t sb = uint32_t(tb) << 23;
    float s;
    std::memcpy(&s, &sb, 4);
    return p * s;
  }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail

#if !defined(MASKATTN_SIMD)
#define MASKATTN_SIMD "kernel/simd/scalar.hpp"
#endif
#include MASKATTN_SIMD
