// Integer dot products and in-register dequantization for the quantized KV caches: the escape hatch
// of the decode kernel's q8/q4 paths, one struct per instruction set, so the kernel itself stays one
// source (kernel/decode_kernel.hpp calls only what is declared here).
//
// Q·Kᵀ: each query row is quantized per block of 32 like a q8 key (kernel/quant.hpp), and a block's
// dot product is an exact integer sum (|sum| <= 32 * 127 * 127 < 2^24, so exact in float too):
//   q8 keys  s += dq * dk * Σ q_i k_i
//   q4 keys  s += dq * dk * (Σ q_i n_i - 8 Σ q_i)      (n_i the stored nibble, k_i = n_i - 8)
// The constant terms (-8 Σq, and VNNI's -128 Σq) are precomputed per query block as an integer
// vector added to the partial sums, so a block costs the instructions below and nothing else:
//   AVX-512 VNNI  vpdpbusd (unsigned x signed bytes: keys biased by +128)
//   AVX2          vpmaddubsw + vpmaddwd (q8: |k| and sign(q, k))
//   SSE2          widen to int16 + pmaddwd          (queries prepared as int16)
//   SIMD128       i32x4.dot_i16x8_s                 (queries prepared as int16)
//   relaxed SIMD  i32x4.relaxed_dot_i8x16_i7x16_add_s (|k| <= 127 and nibbles are 7-bit)
//   NEON          smull/smlal2 + sadalp (sdot where the compiler targets dotprod)
// Each partial-sum vector is converted to float and accumulated with the block's scale product;
// several (row, key) pairs are folded at the end with one Simd<FArch>::reduce_lanes.
//
// P·V dequantizes in registers: 16 stored values at a time become 16 / W float vectors, which the
// kernel multiplies by p_j x scale; the scale is folded into the probability, not the values.
#pragma once

#include "kernel/arch_namespace.hpp"

#include <cstdint>
#include <cstring>

#include "kernel/quant.hpp"
#include "kernel/simd.hpp"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#elif defined(__AVX2__) || defined(__SSE2__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// The scalar definitions (the scalar target, and the meaning of every vector version).
struct QuantDotScalar {
  using FArch = ScalarArch;
  using IV = int32_t;
  static constexpr const char* kName = "scalar";
  struct Block {
    int8_t q[32];
    int32_t bias8, bias4;  // added to Σ q k for q8 keys (0) and q4 keys (-8 Σq)
    float d;
  };
  static void prepare(const int8_t* q, float d, Block& out) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) { out.q[i] = q[i]; sum += q[i]; }
    out.bias8 = 0;
    out.bias4 = -8 * sum;
    out.d = d;
  }
  static IV dot_q8(const Block& b, const uint8_t* k) {
    int32_t s = b.bias8;
    for (int i = 0; i < 32; ++i) s += int32_t(b.q[i]) * int32_t(int8_t(k[i]));
    return s;
  }
  static IV dot_q4(const Block& b, const uint8_t* k) {
    int32_t s = b.bias4;
    for (int i = 0; i < 16; ++i) s += int32_t(b.q[i]) * (k[i] & 15) + int32_t(b.q[i + 16]) * (k[i] >> 4);
    return s;
  }
  static float to_float(IV x) { return float(x); }
};

// Dequantizes 16 stored values to float vectors of the kernel's width (through memory: the
// fallback of every width that has no conversion instructions written below).
template <class S>
struct DequantThroughMemory {
  using V = typename S::V;
  static constexpr int N = 16 / S::W;
  static void q8(const uint8_t* p, V* out) {
    alignas(64) float f[16];
    for (int i = 0; i < 16; ++i) f[i] = float(int8_t(p[i]));
    for (int c = 0; c < N; ++c) out[c] = S::load(f + c * S::W);
  }
  // Low nibbles (elements 0-15 of a q4 block) into lo, high nibbles (16-31) into hi.
  static void q4(const uint8_t* p, V* lo, V* hi) {
    alignas(64) float f[32];
    for (int i = 0; i < 16; ++i) { f[i] = float((p[i] & 15) - 8); f[i + 16] = float((p[i] >> 4) - 8); }
    for (int c = 0; c < N; ++c) { lo[c] = S::load(f + c * S::W); hi[c] = S::load(f + 16 + c * S::W); }
  }
};

template <class Arch>
struct QuantDot;

template <>
struct QuantDot<ScalarArch> : QuantDotScalar, DequantThroughMemory<Simd<ScalarArch>> {};

#ifndef XSIMD_NO_SUPPORTED_ARCHITECTURE

template <class Arch>
struct Dequant : DequantThroughMemory<Simd<Arch>> {};

#if defined(__AVX2__)
template <class Arch>
struct DequantAvx2 {
  using S = Simd<Arch>;
  using V = typename S::V;
  static __m256 q8_8(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }
  static void q8(const uint8_t* p, V* out) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (S::W == 16) {
#if defined(__AVX512F__)
      out[0] = V(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)));
#endif
    } else {
      out[0] = V(q8_8(b));
      out[1] = V(q8_8(_mm_srli_si128(b, 8)));
    }
  }
  static void q4(const uint8_t* p, V* lo, V* hi) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (S::W == 16) {
#if defined(__AVX512F__)
      const __m512i x = _mm512_cvtepu8_epi32(b), eight = _mm512_set1_epi32(8);
      lo[0] = V(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(x, _mm512_set1_epi32(15)), eight)));
      hi[0] = V(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(x, 4), eight)));
#endif
    } else {
      const __m256i fifteen = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
      for (int c = 0; c < 2; ++c) {
        const __m256i x = _mm256_cvtepu8_epi32(c ? _mm_srli_si128(b, 8) : b);
        lo[c] = V(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(x, fifteen), eight)));
        hi[c] = V(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(x, 4), eight)));
      }
    }
  }
};
#endif

#if defined(__wasm_simd128__)
template <class Arch>
struct DequantWasm {
  using V = typename Simd<Arch>::V;
  static V f(v128_t x) { return V(__m128(wasm_f32x4_convert_i32x4(x))); }
  static void q8(const uint8_t* p, V* out) {
    const v128_t b = wasm_v128_load(p);
    const v128_t lo = wasm_i16x8_extend_low_i8x16(b), hi = wasm_i16x8_extend_high_i8x16(b);
    out[0] = f(wasm_i32x4_extend_low_i16x8(lo));
    out[1] = f(wasm_i32x4_extend_high_i16x8(lo));
    out[2] = f(wasm_i32x4_extend_low_i16x8(hi));
    out[3] = f(wasm_i32x4_extend_high_i16x8(hi));
  }
  static void q4(const uint8_t* p, V* lo, V* hi) {
    const v128_t b = wasm_v128_load(p), eight = wasm_i8x16_splat(8);
    // Nibble - 8 as signed bytes, then widened like q8.
    const v128_t l = wasm_i8x16_sub(wasm_v128_and(b, wasm_i8x16_splat(15)), eight);
    const v128_t h = wasm_i8x16_sub(wasm_u8x16_shr(b, 4), eight);
    const v128_t parts[2] = {l, h};
    V* outs[2] = {lo, hi};
    for (int s = 0; s < 2; ++s) {
      const v128_t w0 = wasm_i16x8_extend_low_i8x16(parts[s]), w1 = wasm_i16x8_extend_high_i8x16(parts[s]);
      outs[s][0] = f(wasm_i32x4_extend_low_i16x8(w0));
      outs[s][1] = f(wasm_i32x4_extend_high_i16x8(w0));
      outs[s][2] = f(wasm_i32x4_extend_low_i16x8(w1));
      outs[s][3] = f(wasm_i32x4_extend_high_i16x8(w1));
    }
  }
};
#endif

// The vector version, chosen by the instruction set this translation unit is compiled for.
template <class Arch>
struct QuantDot
#if defined(__wasm_simd128__)
    : DequantWasm<Arch>
#elif defined(__AVX2__)
    : DequantAvx2<Arch>
#else
    : DequantThroughMemory<Simd<Arch>>
#endif
{
#if defined(__wasm_simd128__)
  using FArch = Arch;  // 4 lanes (xsimd sse4_1 through Emscripten's headers)
  using IV = v128_t;
#if defined(__wasm_relaxed_simd__)
  static constexpr const char* kName = "relaxed i8x16 dot";
  struct Block {
    int8_t q[32];
    int32_t bias8[4], bias4[4];
    float d;
  };
#else
  static constexpr const char* kName = "i32x4.dot_i16x8_s";
  struct Block {
    int16_t q[32];
    int32_t bias8[4], bias4[4];
    float d;
  };
#endif
  static float lane0_bias(int32_t* bias, int32_t v) { bias[0] = v; bias[1] = bias[2] = bias[3] = 0; return 0; }
  static void prepare(const int8_t* q, float d, Block& out) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) { out.q[i] = q[i]; sum += q[i]; }
    lane0_bias(out.bias8, 0);
    lane0_bias(out.bias4, -8 * sum);
    out.d = d;
  }
#if defined(__wasm_relaxed_simd__)
  // Σ q k = Σ (q * sign(k)) |k|: |k| <= 127 fits the 7-bit operand.
  static v128_t signed_dot(v128_t q, v128_t k, v128_t acc) {
    const v128_t neg = wasm_i8x16_lt(k, wasm_i8x16_splat(0));
    const v128_t qs = wasm_v128_bitselect(wasm_i8x16_neg(q), q, neg);
    return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(qs, wasm_i8x16_abs(k), acc);
  }
  static IV dot_q8(const Block& b, const uint8_t* k) {
    v128_t acc = wasm_v128_load(b.bias8);
    acc = signed_dot(wasm_v128_load(b.q), wasm_v128_load(k), acc);
    return signed_dot(wasm_v128_load(b.q + 16), wasm_v128_load(k + 16), acc);
  }
  static IV dot_q4(const Block& b, const uint8_t* k) {
    const v128_t x = wasm_v128_load(k);
    v128_t acc = wasm_v128_load(b.bias4);
    acc = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(b.q), wasm_v128_and(x, wasm_i8x16_splat(15)), acc);
    return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(b.q + 16), wasm_u8x16_shr(x, 4), acc);
  }
#else
  static IV dot_q8(const Block& b, const uint8_t* k) {
    v128_t acc = wasm_v128_load(b.bias8);
    for (int h = 0; h < 2; ++h) {
      const v128_t x = wasm_v128_load(k + 16 * h);
      acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(b.q + 16 * h), wasm_i16x8_extend_low_i8x16(x)));
      acc = wasm_i32x4_add(acc,
                           wasm_i32x4_dot_i16x8(wasm_v128_load(b.q + 16 * h + 8), wasm_i16x8_extend_high_i8x16(x)));
    }
    return acc;
  }
  static IV dot_q4(const Block& b, const uint8_t* k) {
    const v128_t x = wasm_v128_load(k);
    const v128_t lo = wasm_v128_and(x, wasm_i8x16_splat(15)), hi = wasm_u8x16_shr(x, 4);
    v128_t acc = wasm_v128_load(b.bias4);
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(b.q), wasm_u16x8_extend_low_u8x16(lo)));
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(b.q + 8), wasm_u16x8_extend_high_u8x16(lo)));
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(b.q + 16), wasm_u16x8_extend_low_u8x16(hi)));
    return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(b.q + 24), wasm_u16x8_extend_high_u8x16(hi)));
  }
#endif
  static typename Simd<FArch>::V to_float(IV x) { return typename Simd<FArch>::V(__m128(wasm_f32x4_convert_i32x4(x))); }

#elif defined(__AVX2__)
  // 8 lanes of int32 partial sums per block (ymm, also in the AVX-512 kernels: one block is 32 bytes).
  using FArch = xsimd::fma3<xsimd::avx2>;
  using IV = __m256i;
  struct Block {
    int8_t q[32];
    int32_t bias8[8], bias4[8];
    float d;
  };
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  static constexpr const char* kName = "vpdpbusd";
  static constexpr int32_t kQ8Offset = 128;  // keys biased to unsigned bytes: Σ (k + 128) q - 128 Σ q
#else
  static constexpr const char* kName = "vpmaddubsw";
  static constexpr int32_t kQ8Offset = 0;
#endif
  static void prepare(const int8_t* q, float d, Block& out) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) { out.q[i] = q[i]; sum += q[i]; }
    for (int i = 0; i < 8; ++i) out.bias8[i] = out.bias4[i] = 0;
    out.bias8[0] = -kQ8Offset * sum;
    out.bias4[0] = -8 * sum;
    out.d = d;
  }
  static __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  // 16 bytes of nibbles as 32 unsigned bytes in element order (low nibbles, then high nibbles).
  static __m256i nibbles(const uint8_t* k) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k)), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
  }
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  static IV dot_q8(const Block& b, const uint8_t* k) {
    const __m256i ku = _mm256_xor_si256(load(k), _mm256_set1_epi8(char(0x80)));
    return _mm256_dpbusd_epi32(load(b.bias8), ku, load(b.q));
  }
  static IV dot_q4(const Block& b, const uint8_t* k) { return _mm256_dpbusd_epi32(load(b.bias4), nibbles(k), load(b.q)); }
#else
  static IV dot_q8(const Block& b, const uint8_t* k) {
    const __m256i kv = load(k), qv = load(b.q);
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(kv), _mm256_sign_epi8(qv, kv));
    return _mm256_add_epi32(load(b.bias8), _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static IV dot_q4(const Block& b, const uint8_t* k) {
    const __m256i pairs = _mm256_maddubs_epi16(nibbles(k), load(b.q));
    return _mm256_add_epi32(load(b.bias4), _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
#endif
  static typename Simd<FArch>::V to_float(IV x) { return typename Simd<FArch>::V(_mm256_cvtepi32_ps(x)); }

#elif defined(__SSE2__)
  using FArch = Arch;
  using IV = __m128i;
  static constexpr const char* kName = "pmaddwd";
  struct Block {
    int16_t q[32];
    int32_t bias8[4], bias4[4];
    float d;
  };
  static void prepare(const int8_t* q, float d, Block& out) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) { out.q[i] = q[i]; sum += q[i]; }
    for (int i = 0; i < 4; ++i) out.bias8[i] = out.bias4[i] = 0;
    out.bias4[0] = -8 * sum;
    out.d = d;
  }
  static __m128i load(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static IV dot_q8(const Block& b, const uint8_t* k) {
    __m128i acc = load(b.bias8);
    for (int h = 0; h < 2; ++h) {
      const __m128i x = load(k + 16 * h);
      const __m128i lo = _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8), hi = _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8);
      acc = _mm_add_epi32(acc, _mm_madd_epi16(load(b.q + 16 * h), lo));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(load(b.q + 16 * h + 8), hi));
    }
    return acc;
  }
  static IV dot_q4(const Block& b, const uint8_t* k) {
    const __m128i x = load(k), m = _mm_set1_epi8(15), z = _mm_setzero_si128();
    const __m128i lo = _mm_and_si128(x, m), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m);
    __m128i acc = load(b.bias4);
    acc = _mm_add_epi32(acc, _mm_madd_epi16(load(b.q), _mm_unpacklo_epi8(lo, z)));
    acc = _mm_add_epi32(acc, _mm_madd_epi16(load(b.q + 8), _mm_unpackhi_epi8(lo, z)));
    acc = _mm_add_epi32(acc, _mm_madd_epi16(load(b.q + 16), _mm_unpacklo_epi8(hi, z)));
    return _mm_add_epi32(acc, _mm_madd_epi16(load(b.q + 24), _mm_unpackhi_epi8(hi, z)));
  }
  static typename Simd<FArch>::V to_float(IV x) { return typename Simd<FArch>::V(_mm_cvtepi32_ps(x)); }

#elif defined(__ARM_NEON)
  using FArch = Arch;
  using IV = int32x4_t;
  struct Block {
    int8_t q[32];
    int32_t bias8[4], bias4[4];
    float d;
  };
  static void prepare(const int8_t* q, float d, Block& out) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) { out.q[i] = q[i]; sum += q[i]; }
    for (int i = 0; i < 4; ++i) out.bias8[i] = out.bias4[i] = 0;
    out.bias4[0] = -8 * sum;
    out.d = d;
  }
#if defined(__ARM_FEATURE_DOTPROD)
  static constexpr const char* kName = "sdot";
  static int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
#else
  static constexpr const char* kName = "smull/sadalp";
  static int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
  }
#endif
  static IV dot_q8(const Block& b, const uint8_t* k) {
    int32x4_t acc = vld1q_s32(b.bias8);
    acc = dot16(acc, vld1q_s8(b.q), vreinterpretq_s8_u8(vld1q_u8(k)));
    return dot16(acc, vld1q_s8(b.q + 16), vreinterpretq_s8_u8(vld1q_u8(k + 16)));
  }
  static IV dot_q4(const Block& b, const uint8_t* k) {
    const uint8x16_t x = vld1q_u8(k);
    int32x4_t acc = vld1q_s32(b.bias4);
    acc = dot16(acc, vld1q_s8(b.q), vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(15))));
    return dot16(acc, vld1q_s8(b.q + 16), vreinterpretq_s8_u8(vshrq_n_u8(x, 4)));
  }
  static typename Simd<FArch>::V to_float(IV x) { return typename Simd<FArch>::V(vcvtq_f32_s32(x)); }
#else
#error "no integer dot product for this instruction set"
#endif
};

#endif  // XSIMD_NO_SUPPORTED_ARCHITECTURE

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
