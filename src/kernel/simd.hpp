// The few vector primitives the kernel needs, in one place (the escape hatch from xsimd is small
// and named). Simd<Arch> wraps xsimd::batch<float, Arch>; Simd<ScalarArch> is the same interface on
// plain float, so one kernel source also builds for engines without SIMD.
//
// exp2 is our own: the magic-number rounding trick needs no float->int conversion, which
// Emscripten 3.1.6 lowers to a scalar loop (docs/development.md, "Toolchain notes"), so it stays in
// SIMD everywhere.
#pragma once

#include "base/arch_namespace.hpp"
#include "kernel/half.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <xsimd/xsimd.hpp>
#if defined(__wasm_relaxed_simd__)
#include <wasm_simd128.h>
#endif

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

// dst[m * dst_stride + i] = rows[i][m] for i, m < 4: a 4x4 block transposed, for packing K and Q
// rows into the micro-tiles' [d][keys] / [d][rows] layouts. Four 128-bit loads, eight shuffles and
// four stores instead of sixteen strided scalar stores. SSE on x86 (every x86 target has it, and
// the wider ones encode it as VEX) and on SIMD128 (Emscripten's SSE headers lower these to
// i32x4.shuffle; the prefill kernel's WebAssembly tuning does not call it, see pack_rows there);
// elsewhere (scalar builds, NEON for now: no ARM hardware to measure) a plain loop.
inline void transpose4x4(const float* const rows[4], float* dst, int64_t dst_stride) {
#if defined(__SSE__)
  __m128 r0 = _mm_loadu_ps(rows[0]), r1 = _mm_loadu_ps(rows[1]), r2 = _mm_loadu_ps(rows[2]),
         r3 = _mm_loadu_ps(rows[3]);
  const __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpacklo_ps(r2, r3), t2 = _mm_unpackhi_ps(r0, r1),
               t3 = _mm_unpackhi_ps(r2, r3);
  r0 = _mm_movelh_ps(t0, t1);  // column 0
  r1 = _mm_movehl_ps(t1, t0);  // column 1
  r2 = _mm_movelh_ps(t2, t3);
  r3 = _mm_movehl_ps(t3, t2);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + dst_stride, r1);
  _mm_storeu_ps(dst + 2 * dst_stride, r2);
  _mm_storeu_ps(dst + 3 * dst_stride, r3);
#else
  for (int m = 0; m < 4; ++m)
    for (int i = 0; i < 4; ++i) dst[m * dst_stride + i] = rows[i][m];
#endif
}

// dst[m * dst_stride + i] = rows[i][m] for i, m < N: an N x N block transposed, N = 4, 8 or 16,
// with the widest shuffles the target has (AVX-512 16x16: 64 shuffles for 256 floats; AVX 8x8: 24
// for 64), else 4x4 blocks. Moves query rows into lanes and lanes back into output rows.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 shuffle intrinsics start from _mm512_undefined_ps(), which its -Wuninitialized
// reports at every use (a false positive: every lane is written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
template <int N>
inline void transpose_block(const float* const rows[N], float* dst, int64_t dst_stride) {
#if defined(__AVX512F__)
  if constexpr (N == 16) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
      const __m512 a = _mm512_loadu_ps(rows[i]), b = _mm512_loadu_ps(rows[i + 1]);
      t[i] = _mm512_unpacklo_ps(a, b);      // per 128-bit lane L: a[4L] b[4L] a[4L+1] b[4L+1]
      t[i + 1] = _mm512_unpackhi_ps(a, b);  // a[4L+2] b[4L+2] a[4L+3] b[4L+3]
    }
    for (int q = 0; q < 4; ++q) {  // rows 4q..4q+3: u[4q + c] holds column 4L + c of them in lane L
      u[4 * q + 0] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; ++c) {  // gather lane L of the four quads: column 4L + c
      const __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
      const __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
      _mm512_storeu_ps(dst + c * dst_stride, _mm512_shuffle_f32x4(x0, y0, 0x88));
      _mm512_storeu_ps(dst + (4 + c) * dst_stride, _mm512_shuffle_f32x4(x1, y1, 0x88));
      _mm512_storeu_ps(dst + (8 + c) * dst_stride, _mm512_shuffle_f32x4(x0, y0, 0xdd));
      _mm512_storeu_ps(dst + (12 + c) * dst_stride, _mm512_shuffle_f32x4(x1, y1, 0xdd));
    }
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (N == 8) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
      const __m256 a = _mm256_loadu_ps(rows[i]), b = _mm256_loadu_ps(rows[i + 1]);
      t[i] = _mm256_unpacklo_ps(a, b);
      t[i + 1] = _mm256_unpackhi_ps(a, b);
    }
    for (int q = 0; q < 2; ++q) {
      u[4 * q + 0] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; ++c) {  // u[c]: column c (low lane) and 4 + c (high lane) of rows 0-3; u[4 + c]: of rows 4-7
      _mm256_storeu_ps(dst + c * dst_stride, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
      _mm256_storeu_ps(dst + (4 + c) * dst_stride, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
    return;
  }
#endif
  static_assert(N % 4 == 0, "blocks of 4");
  for (int i = 0; i < N; i += 4)
    for (int m = 0; m < N; m += 4) {
      const float* const quad[4] = {rows[i] + m, rows[i + 1] + m, rows[i + 2] + m, rows[i + 3] + m};
      transpose4x4(quad, dst + m * dst_stride + i, dst_stride);
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// An element of K or V as float: float as is, uint16_t as IEEE half bits, Bf16 by a shift.
inline float element(float x) { return x; }
inline float element(uint16_t h) { return half_bits_to_float(h); }
inline float element(Bf16 b) { return bf16_bits_to_float(b.bits); }

// Always inlined, both: GCC 12 deletes a call it does not inline (a function holding only
// prefetches counts as free of side effects), and so the quantized Q·Kᵀ of every target requested
// no K rows at all (objdump; tests/check_prefetch.sh now checks the kernels hold them). With the
// calls back (Zen 5, 1 thread, caches from DRAM) the GQA q8 decode step went 0.85-0.91 -> 0.60-0.63 ms.
#if defined(__GNUC__)
#define MASKATTN_PREFETCH_INLINE __attribute__((always_inline)) inline
#else
#define MASKATTN_PREFETCH_INLINE inline
#endif

// Requests the cache lines of `bytes` bytes at p (a no-op where the compiler has no prefetch).
MASKATTN_PREFETCH_INLINE void prefetch_bytes(const void* p, int64_t bytes) {
#if defined(__GNUC__)
  for (int64_t x = 0; x < bytes; x += 64) __builtin_prefetch(static_cast<const char*>(p) + x);
#else
  (void)p; (void)bytes;
#endif
}

// One K or V row's lines, unrolled for rows up to 192 bytes (quantized rows, requested per key:
// there the loop's own instructions measured dearer than the prefetches).
MASKATTN_PREFETCH_INLINE void prefetch_row(const void* row, int64_t bytes) {
#if defined(__GNUC__)
  if (bytes > 192) return prefetch_bytes(row, bytes);
  const char* c = static_cast<const char*>(row);
  __builtin_prefetch(c);
  __builtin_prefetch(c + 64);
  if (bytes > 128) __builtin_prefetch(c + 128);
#else
  (void)row; (void)bytes;
#endif
}

// Bits [a, b) of a 64-bit word, the bounds clamped to [0, 64]: a key interval over a 64-key tile.
inline uint64_t range_bits(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 0);
  b = std::min<int64_t>(b, 64);
  if (b <= a) return 0;
  const uint64_t below_b = b == 64 ? ~uint64_t(0) : (uint64_t(1) << b) - 1;
  return below_b & ~((uint64_t(1) << a) - 1);
}

// Bit j set where p[j] != 0, for j < n <= 64 (bytes past n are not read): a row of a boolean mask
// as the prefill kernel's tile bits. One masked load and test on AVX-512BW; 32 / 16 bytes a compare
// and movemask on AVX2, SSE2 and SIMD128; a loop elsewhere (NEON: no movemask, and no hardware here
// to measure a substitute).
inline uint64_t nonzero_byte_bits(const uint8_t* p, int64_t n) {
#if defined(__AVX512BW__)
  const __m512i x = _mm512_maskz_loadu_epi8(n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1, p);
  return uint64_t(_mm512_test_epi8_mask(x, x));
#else
  uint64_t bits = 0;
  int64_t j = 0;
#if defined(__AVX2__)
  for (; j + 32 <= n; j += 32) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + j));
    bits |= uint64_t(~uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, _mm256_setzero_si256())))) << j;
  }
#endif
#if defined(__wasm_simd128__)
  for (; j + 16 <= n; j += 16)
    bits |= uint64_t(wasm_i8x16_bitmask(wasm_i8x16_ne(wasm_v128_load(p + j), wasm_i8x16_splat(0)))) << j;
#elif defined(__SSE2__)
  for (; j + 16 <= n; j += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j));
    bits |= uint64_t(~uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128()))) & 0xffffu) << j;
  }
#endif
  for (; j < n; ++j) bits |= uint64_t(p[j] != 0) << j;
  return bits;
#endif
}

template <class Arch>
struct Simd;

// The vector version exists only where xsimd has a vector architecture (not in a scalar wasm build).
#ifndef XSIMD_NO_SUPPORTED_ARCHITECTURE
template <class Arch>
struct Simd {
  using V = xsimd::batch<float, Arch>;
  using M = xsimd::batch_bool<float, Arch>;
  using I = xsimd::batch<int32_t, Arch>;
  static constexpr int W = int(V::size);
  // Vector registers the tiles may use. WebAssembly runs on x64's 16 XMM registers, of which V8
  // keeps one as scratch, and without FMA every product needs a temporary: budget fewer there.
#if defined(__wasm__)
  static constexpr int kRegisters = 12;
#elif defined(__aarch64__)
  // AArch64: 32 128-bit vector registers (v0-v31), and FMA is baseline.
  static constexpr int kRegisters = 32;
#else
  static constexpr int kRegisters = W >= 16 ? 32 : 16;
#endif

  static V load(const float* p) { return V::load_unaligned(p); }
  static void store(float* p, const V& x) { x.store_unaligned(p); }
  static V splat(float x) { return V(x); }
  // W IEEE halves to W floats: F16C / AVX-512 / NEON conversion where there is one, else integer
  // unpacking (SSE2, and SIMD128 through Emscripten's SSE headers).
  static V load(const uint16_t* p) {
#if defined(__aarch64__) && defined(__ARM_NEON)
    // fcvtl: exact for every half (subnormals too); a signalling NaN comes out quiet, as with F16C.
    if constexpr (W == 4) return V(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))));
#endif
#if defined(__AVX512F__)
    if constexpr (W == 16) return V(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
#if defined(__F16C__)
    if constexpr (W == 8) return V(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
#if defined(__SSE2__)
    if constexpr (W == 4) {
      const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      return from_half_bits(I(_mm_unpacklo_epi16(h, _mm_setzero_si128())));
    }
#endif
    alignas(64) int32_t bits[W];  // no conversion instruction for this width: through memory
    for (int i = 0; i < W; ++i) bits[i] = p[i];
    return from_half_bits(I::load_aligned(bits));
  }
  // W bfloat16 values to W floats: each is a float's upper half, so a zero-extension and a 16-bit
  // shift (one unpack with zeros on SSE2 and SIMD128, one shifting widen on NEON).
  static V load(const Bf16* p) {
    const auto* u = reinterpret_cast<const uint16_t*>(p);
#if defined(__aarch64__) && defined(__ARM_NEON)
    if constexpr (W == 4) return V(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(u), 16)));
#endif
#if defined(__AVX512F__)
    if constexpr (W == 16)
      return V(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u))), 16)));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8)
      return V(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u))), 16)));
#endif
#if defined(__SSE2__)
    if constexpr (W == 4)
      return V(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u)))));
#endif
    alignas(64) int32_t bits[W];  // no widening instruction for this width: through memory
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
  // lanes whose int32 has bit `bit` set, and bit r = lane r of a mask. One instruction or two on
  // x86, NEON and SIMD128 (through the SSE headers); through integer-to-float elsewhere.
  static I load_bits(const uint32_t* p) { return I::load_unaligned(reinterpret_cast<const int32_t*>(p)); }
  static M bit_set(const I& w, int bit) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return M(_mm512_test_epi32_mask(w, _mm512_set1_epi32(int32_t(1u << bit))));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8) {
      const __m256i c = _mm256_set1_epi32(int32_t(1u << bit));
      return M(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(w, c), c)));
    }
#endif
#if defined(__SSE2__)
    if constexpr (W == 4) {
      const __m128i c = _mm_set1_epi32(int32_t(1u << bit));
      return M(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(w, c), c)));
    }
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
    if constexpr (W == 4) return M(vtstq_u32(vreinterpretq_u32_s32(w), vdupq_n_u32(1u << bit)));
#endif
    return xsimd::to_float(w & I(int32_t(1u << bit))) != V(0.0f);
  }
  static uint32_t lane_bits(const M& m) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return uint32_t(__mmask16(m));
#endif
#if defined(__AVX__)
    if constexpr (W == 8) return uint32_t(_mm256_movemask_ps(m));
#endif
#if defined(__SSE__)
    if constexpr (W == 4) return uint32_t(_mm_movemask_ps(m));
#endif
    alignas(64) bool lanes[W];
    m.store_aligned(lanes);
    uint32_t bits = 0;
    for (int i = 0; i < W; ++i) bits |= uint32_t(lanes[i]) << i;
    return bits;
  }
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
  static V select(const M& m, const V& a, const V& b) { return xsimd::select(m, a, b); }
  static V abs(const V& x) { return xsimd::abs(x); }
  static V tanh(const V& x) { return xsimd::tanh(x); }
  static bool any(const M& m) { return xsimd::any(m); }
  static V iota() {
    alignas(64) float lanes[W];
    for (int i = 0; i < W; ++i) lanes[i] = float(i);
    return V::load_aligned(lanes);
  }
  // x < acc ? acc : x lane-wise: a running maximum that takes a NaN `x` (the comparison is false for
  // NaN). A NaN already in `acc` may be replaced: the kernel does not rely on the max to carry NaN,
  // the row sum does. One instruction: maxps(acc, x) returns its second operand for a NaN (x86),
  // vmaxq propagates NaN (NEON), and WebAssembly's f32x4.pmax(x, acc) is this expression
  // (f32x4.max and Emscripten's _mm_max_ps cost a compare and a select there, like a select here).
  // (Do not test NaN with `x != x` here: xsimd 8.1's AVX `!=` is an ordered compare, false for NaN.)
  static V max_keep_nan(const V& acc, const V& x) {
#if defined(__wasm__)
    return V(__m128(wasm_f32x4_pmax(v128_t(__m128(x)), v128_t(__m128(acc)))));
#else
    return xsimd::max(acc, x);
#endif
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

  // 2^x for x <= 127, exact 0 for x <= -127, NaN for NaN.
  static V exp2(const V& x) {
    using namespace exp2_poly;
    const V xc = max_keep_nan(V(kFlushBelow), x);
    const V t = xc + V(kRoundMagic);
    const V r = xc - (t - V(kRoundMagic));  // r in [-0.5, 0.5]
    // Horner: each step's multiply is on the dependency chain, where a fused multiply-add's
    // shorter latency pays even on CPUs whose separate add pipes make mul + add as fast as FMA
    // for accumulations (the relaxed-SIMD build's fma).
    V p = V(c6);
    p = fma(p, r, V(c5));
    p = fma(p, r, V(c4));
    p = fma(p, r, V(c3));
    p = fma(p, r, V(c2));
    p = fma(p, r, V(c1));
    p = fma(p, r, V(1.0f));
    // t's low mantissa bits hold k + 127 (k = round(x)); shifting by 23 moves them into the
    // exponent field, and the bits above them out (k + 127 = 0 gives +0).
#if defined(__aarch64__) && defined(__ARM_NEON)
    // xsimd 8.1's NEON bitwise_cast goes through a table of function pointers, which g++ 12 leaves
    // as two calls per exp2 (objdump): reinterpret directly.
    const I scale_bits = I(vreinterpretq_s32_f32(t)) << 23;
    return p * V(vreinterpretq_f32_s32(scale_bits));
#else
    const I scale_bits = xsimd::bitwise_cast<I>(t) << 23;
    return p * xsimd::bitwise_cast<V>(scale_bits);
#endif
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
