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
//   AVX-512 VNNI  vpdpbusd on zmm, two blocks per instruction (unsigned x signed bytes: keys biased
//                 by +128; the pair's two scale products broadcast to the halves with one vpermps)
//   AVX2          vpmaddubsw + vpmaddwd (q8: |k| and sign(q, k))
//   SSE2          widen to int16 + pmaddwd          (queries prepared as int16)
//   SIMD128       i32x4.dot_i16x8_s                 (queries prepared as int16); the relaxed-SIMD
//                 build uses the relaxed 8-bit dot products where checks at module start and in
//                 the kernel's own code find them exact (kernel/int_dot_simd128_relaxed.hpp; Node
//                 20's Liftoff gets i32x4.relaxed_dot_i8x16_i7x16_add_s wrong) and this path elsewhere.
//   NEON          smull/smlal2 + sadalp (sdot where the compiler targets dotprod)
// Each partial-sum vector is converted to float and accumulated with the block's scale product; a
// key's blocks are loaded once for all the rows of a register block, and several (row, key) pairs
// are folded at the end with one Simd<FArch>::reduce_lanes.
//
// P·V dequantizes in registers: 16 stored values at a time become 16 / W float vectors, which the
// kernel multiplies by p_j x scale; the scale is folded into the probability, not the values.
#pragma once

#include "base/arch_namespace.hpp"

#include <cstdint>
#include <cstring>

#include "kernel/quant.hpp"
#include "kernel/simd.hpp"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#include "kernel/int_dot_simd128_relaxed.hpp"
#elif defined(__AVX2__) || defined(__SSE2__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// A query row quantized per block of 32 (the q8 rule), in the layout its QuantDot reads: values
// (int8, or int16 where the dot product widens), the block scales, and per block 8 int32 lanes of
// the constant terms for q8 and q4 keys (the value in lane 0, or lanes 0 and 8 for a zmm pair).
template <class QElem>
struct QueryRow {
  const QElem* q = nullptr;
  const float* d = nullptr;
  const int32_t* bias8 = nullptr;
  const int32_t* bias4 = nullptr;

  static int64_t bytes(int64_t nb) { return nb * (32 * int64_t(sizeof(QElem)) + 4 + 64); }
  // Lays the row out at `at` (bytes(nb) bytes, 4-byte aligned) from a q8 row (kernel/quant.hpp).
  // q4_pairs: each pair of blocks (A, B) in the order q4 keys load into a zmm, [A 0-15, B 0-15,
  // A 16-31, B 16-31], with the q4 constants in lanes 0 (A) and 4 (B): AVX-512 VNNI then takes two
  // blocks of nibbles with one load, shift and mask instead of rebuilding the element order.
  static QueryRow prepare(const uint8_t* q8row, int64_t D, int64_t nb, int32_t q8_offset, uint8_t* at,
                          bool q4_pairs = false) {
    QueryRow r;
    auto* q = reinterpret_cast<QElem*>(at);
    auto* d = reinterpret_cast<float*>(at + nb * 32 * int64_t(sizeof(QElem)));
    auto* b8 = reinterpret_cast<int32_t*>(d + nb);
    int32_t* b4 = b8 + nb * 8;
    for (int64_t blk = 0; blk < nb; ++blk) {
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int8_t x = int8_t(q8row[blk * 32 + i]);
        q[blk * 32 + i] = QElem(x);
        sum += x;
      }
      d[blk] = quant_scale(KVType::q8, q8row, D, blk);
      for (int i = 0; i < 8; ++i) b8[blk * 8 + i] = b4[blk * 8 + i] = 0;
      b8[blk * 8] = -q8_offset * sum;
      b4[blk * 8] = -8 * sum;
    }
    if (q4_pairs)
      for (int64_t p = 0; p + 2 <= nb; p += 2) {
        QElem pair[64];
        for (int i = 0; i < 16; ++i) {
          pair[i] = q[p * 32 + i];
          pair[16 + i] = q[(p + 1) * 32 + i];
          pair[32 + i] = q[p * 32 + 16 + i];
          pair[48 + i] = q[(p + 1) * 32 + 16 + i];
        }
        std::memcpy(q + p * 32, pair, sizeof pair);
        b4[p * 8 + 4] = b4[(p + 1) * 8];  // B's constant in lane 4 of the pair's 16
        b4[(p + 1) * 8] = 0;
      }
    r.q = q; r.d = d; r.bias8 = b8; r.bias4 = b4;
    return r;
  }
};

// Dequantizes 16 stored values to float vectors of the kernel's width (through memory: the
// fallback of every width that has no conversion instructions written below).
template <class S>
struct DequantThroughMemory {
  using V = typename S::V;
  static void q8(const uint8_t* p, V* out) {
    alignas(64) float f[16];
    for (int i = 0; i < 16; ++i) f[i] = float(int8_t(p[i]));
    for (int c = 0; c < 16 / S::W; ++c) out[c] = S::load(f + c * S::W);
  }
  // Low nibbles (elements 0-15 of a q4 block) into lo, high nibbles (16-31) into hi.
  static void q4(const uint8_t* p, V* lo, V* hi) {
    alignas(64) float f[32];
    for (int i = 0; i < 16; ++i) { f[i] = float((p[i] & 15) - 8); f[i + 16] = float((p[i] >> 4) - 8); }
    for (int c = 0; c < 16 / S::W; ++c) { lo[c] = S::load(f + c * S::W); hi[c] = S::load(f + 16 + c * S::W); }
  }
  // One half of a q4 block (0: elements 0-15, 1: elements 16-31).
  static void q4_half(const uint8_t* p, int half, V* out) {
    V other[16 / S::W];
    if (half == 0) q4(p, out, other);
    else q4(p, other, out);
  }
};

// Called at the top of each function that calls QuantDot::dot: the relaxed builds check there,
// in the code about to run them, that their relaxed dot products are exact (int_dot_simd128_relaxed.hpp).
#if defined(__wasm_relaxed_simd__)
__attribute__((always_inline)) inline void quant_dot_check_here() { RelaxedIntDot::check_here(); }
#else
inline void quant_dot_check_here() {}
#endif

// The scalar definitions (the scalar target, and the meaning of every vector version).
struct QuantDotScalar {
  static constexpr bool kQ4PairOrder = false;
  static constexpr bool kIntegerValues = false;  // P·V dequantizes V (see QuantDot's SIMD128 version)
  using FArch = ScalarArch;
  using Row = QueryRow<int8_t>;
  static constexpr int32_t kQ8Offset = 0;
  // acc[r * stride] += q_r · k over the nb blocks of key row k (values, then scales at kscales).
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, float* acc, int stride) {
    for (int64_t blk = 0; blk < nb; ++blk)
      for (int r = 0; r < RB; ++r) {
        const int8_t* qb = q[r]->q + blk * 32;
        int32_t s = Q4 ? q[r]->bias4[blk * 8] : q[r]->bias8[blk * 8];
        if constexpr (Q4) {
          const uint8_t* kb = k + blk * 16;
          for (int i = 0; i < 16; ++i) s += int32_t(qb[i]) * (kb[i] & 15) + int32_t(qb[i + 16]) * (kb[i] >> 4);
        } else {
          const uint8_t* kb = k + blk * 32;
          for (int i = 0; i < 32; ++i) s += int32_t(qb[i]) * int32_t(int8_t(kb[i]));
        }
        acc[r * stride] += q[r]->d[blk] * kscales[blk] * float(s);
      }
  }
};

template <class Arch>
struct QuantDot;

template <>
struct QuantDot<ScalarArch> : QuantDotScalar, DequantThroughMemory<Simd<ScalarArch>> {};

#ifndef XSIMD_NO_SUPPORTED_ARCHITECTURE

#if defined(__AVX2__)
// The 32 nibbles of one q4 block (16 bytes) as unsigned bytes in element order.
inline __m256i q4_nibbles(const uint8_t* k) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k)), m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
}

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
  static void q4_half(const uint8_t* p, int half, V* out) {
    V other[16 / S::W];
    if (half == 0) q4(p, out, other);
    else q4(p, other, out);
  }
};
#endif

#if defined(__wasm_simd128__)
template <class Arch>
struct DequantWasm {
  using V = typename Simd<Arch>::V;
  static V f(v128_t x) { return V(__m128(wasm_f32x4_convert_i32x4(x))); }
  static void widen(v128_t b, V* out) {
    const v128_t lo = wasm_i16x8_extend_low_i8x16(b), hi = wasm_i16x8_extend_high_i8x16(b);
    out[0] = f(wasm_i32x4_extend_low_i16x8(lo));
    out[1] = f(wasm_i32x4_extend_high_i16x8(lo));
    out[2] = f(wasm_i32x4_extend_low_i16x8(hi));
    out[3] = f(wasm_i32x4_extend_high_i16x8(hi));
  }
  static void q8(const uint8_t* p, V* out) { widen(wasm_v128_load(p), out); }
  static void q4(const uint8_t* p, V* lo, V* hi) {
    const v128_t b = wasm_v128_load(p), eight = wasm_i8x16_splat(8);
    // Nibble - 8 as signed bytes, then widened like q8.
    widen(wasm_i8x16_sub(wasm_v128_and(b, wasm_i8x16_splat(15)), eight), lo);
    widen(wasm_i8x16_sub(wasm_u8x16_shr(b, 4), eight), hi);
  }
  // Only the half a 16-column pass needs (SIMD128 passes are 16 columns wide).
  static void q4_half(const uint8_t* p, int half, V* out) {
    const v128_t b = wasm_v128_load(p);
    const v128_t n = half == 0 ? wasm_v128_and(b, wasm_i8x16_splat(15)) : wasm_u8x16_shr(b, 4);
    widen(wasm_i8x16_sub(n, wasm_i8x16_splat(8)), out);
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
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // ------------------------------------------------ AVX-512 VNNI: zmm, two blocks per vpdpbusd
  // P·V dequantizes V in registers: measured faster here than P·V in integers (vpmaddwd on int16
  // weight pairs, as SIMD128 does), which cost the decode step 1.6x (MHA q8, 1 thread).
  static constexpr bool kIntegerValues = false;
  using FArch = Arch;
  using FV = typename Simd<FArch>::V;
  using Row = QueryRow<int8_t>;
  static constexpr int32_t kQ8Offset = 128;  // keys biased to unsigned bytes: Σ (k + 128) q - 128 Σ q
  static constexpr bool kQ4PairOrder = true;  // QueryRow::prepare(..., q4_pairs)
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    __m512 acc[RB];  // in registers for the whole row (the caller's array would round-trip memory)
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    // Which block's scale each lane takes: q8 pairs are [A | B]; q4 pairs [A lo, B lo, A hi, B hi].
    const __m512i pair_lanes = Q4 ? _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0)
                                  : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    int64_t blk = 0;
    for (; blk + 2 <= nb; blk += 2) {
      __m512i kv;
      if constexpr (Q4) {  // 32 bytes = two blocks' nibbles: [A lo, B lo | A hi, B hi] in one go
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + blk * 16)), m = _mm256_set1_epi8(15);
        kv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(x, m)), _mm256_and_si256(_mm256_srli_epi16(x, 4), m), 1);
      } else {
        kv = _mm512_xor_si512(_mm512_loadu_si512(k + blk * 32), _mm512_set1_epi8(char(0x80)));
      }
      const __m128 kd = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(kscales + blk)));
      for (int r = 0; r < RB; ++r) {
        const int32_t* bias = (Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8;
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_loadu_si512(bias), kv, _mm512_loadu_si512(q[r]->q + blk * 32));
        const __m128 d = _mm_mul_ps(kd, _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q[r]->d + blk))));
        const __m512 scale = _mm512_permutexvar_ps(pair_lanes, _mm512_castps128_ps512(d));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, acc[r]);
      }
    }
    if (blk < nb) {  // an odd last block: the low half only
      const __m256i kv = Q4 ? q4_nibbles(k + blk * 16)
                            : _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + blk * 32)),
                                               _mm256_set1_epi8(char(0x80)));
      for (int r = 0; r < RB; ++r) {
        const int32_t* bias = (Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8;
        const __m256i sums = _mm256_dpbusd_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)), kv,
                                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[r]->q + blk * 32)));
        const __m512 x = _mm512_zextps256_ps512(_mm256_mul_ps(_mm256_cvtepi32_ps(sums),
                                                              _mm256_set1_ps(q[r]->d[blk] * kscales[blk])));
        acc[r] = _mm512_add_ps(x, acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = FV(acc[r]);
  }

#elif defined(__AVX2__)
  // ------------------------------------------------ AVX2 (also the avx512 target without VNNI/BW): ymm
  // P·V dequantizes V in registers: measured faster here than P·V in integers (vpmaddwd on int16
  // weight pairs, as SIMD128 does), which cost the decode step 1.6x (MHA q8, 1 thread).
  static constexpr bool kIntegerValues = false;
  using FArch = xsimd::fma3<xsimd::avx2>;
  using FV = typename Simd<FArch>::V;
  using Row = QueryRow<int8_t>;
  static constexpr bool kQ4PairOrder = false;
  static constexpr int32_t kQ8Offset = 0;
  static __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    __m256 acc[RB];  // in registers for the whole row (the caller's array would round-trip memory)
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t blk = 0; blk < nb; ++blk) {
      __m256i kv, kabs;
      if constexpr (Q4) {
        kv = q4_nibbles(k + blk * 16);  // unsigned already
        kabs = kv;
      } else {
        kv = load(k + blk * 32);
        kabs = _mm256_abs_epi8(kv);
      }
      const float kd = kscales[blk];
      for (int r = 0; r < RB; ++r) {
        const __m256i qv = load(q[r]->q + blk * 32);
        const __m256i pairs = _mm256_maddubs_epi16(kabs, Q4 ? qv : _mm256_sign_epi8(qv, kv));
        const __m256i sums = _mm256_add_epi32(load((Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8),
                                              _mm256_madd_epi16(pairs, ones));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(q[r]->d[blk] * kd), acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = FV(acc[r]);
  }

#elif defined(__wasm_simd128__) || defined(__SSE2__) || defined(__ARM_NEON)
  // ------------------------------------------------ 128-bit: SIMD128 (relaxed build too), SSE2, NEON
  static constexpr bool kQ4PairOrder = false;
  using FArch = Arch;
  using FV = typename Simd<FArch>::V;
  // A key block is prepared once (widened, or |k| and its signs) and used by every row.
#if defined(__wasm_relaxed_simd__)
  using Row = WithInt8Values<QueryRow<int16_t>>;  // int8 values too, for the relaxed path
#elif defined(__wasm_simd128__)
  using Row = QueryRow<int16_t>;
#endif
#if defined(__wasm_simd128__)
  using IV = v128_t;
  struct KBlock { v128_t w[4]; };  // the 32 values as int16
  static IV bias(const int32_t* p) { return wasm_v128_load(p); }
  static KBlock prep_q8(const uint8_t* k) {
    KBlock b;
    for (int h = 0; h < 2; ++h) {
      const v128_t x = wasm_v128_load(k + 16 * h);
      b.w[2 * h] = wasm_i16x8_extend_low_i8x16(x);
      b.w[2 * h + 1] = wasm_i16x8_extend_high_i8x16(x);
    }
    return b;
  }
  static KBlock prep_q4(const uint8_t* k) {
    const v128_t x = wasm_v128_load(k);
    const v128_t lo = wasm_v128_and(x, wasm_i8x16_splat(15)), hi = wasm_u8x16_shr(x, 4);
    return {{wasm_u16x8_extend_low_u8x16(lo), wasm_u16x8_extend_high_u8x16(lo), wasm_u16x8_extend_low_u8x16(hi),
             wasm_u16x8_extend_high_u8x16(hi)}};
  }
  static IV apply(const int16_t* q, const KBlock& b, IV acc) {
    for (int i = 0; i < 4; ++i) acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(q + 8 * i), b.w[i]));
    return acc;
  }
  static FV to_float(IV x) { return FV(__m128(wasm_f32x4_convert_i32x4(x))); }

  // P·V in integers (measured: dequantizing V in registers made P·V slower than float32 V here;
  // SIMD128 has no float conversion short of 10 instructions per 16 values). The weights p_j x
  // scale_j of a block are rounded to int16 against their largest, and two keys' values, interleaved
  // as int16 pairs, meet a pair of weights in one i32x4.dot_i16x8_s: 4 columns x 2 keys.
  static constexpr bool kIntegerValues = true;
  struct PV {
  using FArch = Arch;
  using IV = v128_t;
  static constexpr int kLanes = 4;  // columns per vector
  // 16 values (one half block) of keys a and b as 4 vectors of (a, b) int16 pairs, columns 4c..4c+3.
  static void pairs(v128_t a, v128_t b, v128_t* out) {
    const v128_t lo = wasm_i8x16_shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const v128_t hi = wasm_i8x16_shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    out[0] = wasm_i16x8_extend_low_i8x16(lo);
    out[1] = wasm_i16x8_extend_high_i8x16(lo);
    out[2] = wasm_i16x8_extend_low_i8x16(hi);
    out[3] = wasm_i16x8_extend_high_i8x16(hi);
  }
  static void pairs_q8(const uint8_t* a, const uint8_t* b, v128_t* out) { pairs(wasm_v128_load(a), wasm_v128_load(b), out); }
  // The `half` nibbles of two q4 blocks' 16 bytes, minus 8.
  static void pairs_q4(const uint8_t* a, const uint8_t* b, int half, v128_t* out) {
    auto nib = [half](const uint8_t* p) {
      const v128_t x = wasm_v128_load(p);
      return wasm_i8x16_sub(half ? wasm_u8x16_shr(x, 4) : wasm_v128_and(x, wasm_i8x16_splat(15)), wasm_i8x16_splat(8));
    };
    pairs(nib(a), nib(b), out);
  }
  static v128_t weight_pair(int16_t wa, int16_t wb) {
    return wasm_i32x4_splat(int32_t(uint32_t(uint16_t(wa)) | (uint32_t(uint16_t(wb)) << 16)));
  }
  static v128_t zero() { return wasm_i32x4_splat(0); }
  static v128_t madd(v128_t pairs, v128_t w, v128_t acc) { return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(pairs, w)); }
  static FV to_float(IV x) { return FV(__m128(wasm_f32x4_convert_i32x4(x))); }
  };
#elif defined(__SSE2__)
  static constexpr bool kIntegerValues = false;
  using Row = QueryRow<int16_t>;
  using IV = __m128i;
  struct KBlock { __m128i w[4]; };  // the 32 values as int16
  static __m128i load(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static IV bias(const int32_t* p) { return load(p); }
  static KBlock prep_q8(const uint8_t* k) {
    KBlock b;
    for (int h = 0; h < 2; ++h) {
      const __m128i x = load(k + 16 * h);
      b.w[2 * h] = _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8);
      b.w[2 * h + 1] = _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8);
    }
    return b;
  }
  static KBlock prep_q4(const uint8_t* k) {
    const __m128i x = load(k), m = _mm_set1_epi8(15), z = _mm_setzero_si128();
    const __m128i lo = _mm_and_si128(x, m), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m);
    return {{_mm_unpacklo_epi8(lo, z), _mm_unpackhi_epi8(lo, z), _mm_unpacklo_epi8(hi, z), _mm_unpackhi_epi8(hi, z)}};
  }
  static IV apply(const int16_t* q, const KBlock& b, IV acc) {
    for (int i = 0; i < 4; ++i) acc = _mm_add_epi32(acc, _mm_madd_epi16(load(q + 8 * i), b.w[i]));
    return acc;
  }
  static FV to_float(IV x) { return FV(_mm_cvtepi32_ps(x)); }
#else
  static constexpr bool kIntegerValues = false;
  using Row = QueryRow<int8_t>;
  using IV = int32x4_t;
  struct KBlock { int8x16_t v[2]; };
  static IV bias(const int32_t* p) { return vld1q_s32(p); }
#if defined(__ARM_FEATURE_DOTPROD)
  static int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
#else
  static int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
  }
#endif
  static KBlock prep_q8(const uint8_t* k) {
    return {{vreinterpretq_s8_u8(vld1q_u8(k)), vreinterpretq_s8_u8(vld1q_u8(k + 16))}};
  }
  static KBlock prep_q4(const uint8_t* k) {
    const uint8x16_t x = vld1q_u8(k);
    return {{vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(15))), vreinterpretq_s8_u8(vshrq_n_u8(x, 4))}};
  }
  static IV apply(const int8_t* q, const KBlock& b, IV acc) {
    acc = dot16(acc, vld1q_s8(q), b.v[0]);
    return dot16(acc, vld1q_s8(q + 16), b.v[1]);
  }
  static FV to_float(IV x) { return FV(vcvtq_f32_s32(x)); }
#endif
  static constexpr int32_t kQ8Offset = 0;
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    using FS = Simd<FArch>;
#if defined(__wasm_relaxed_simd__)
    switch (RelaxedIntDot::mode()) {  // checked by quant_dot_check_here() (int_dot_simd128_relaxed.hpp)
      case RelaxedIntDot::i8x16_add: return RelaxedIntDot::dot<FS, RelaxedIntDot::i8x16_add, RB, Q4>(q, k, kscales, nb, out, stride);
      case RelaxedIntDot::i16x8: return RelaxedIntDot::dot<FS, RelaxedIntDot::i16x8, RB, Q4>(q, k, kscales, nb, out, stride);
      default: break;
    }
#endif
    FV acc[RB];  // in registers for the whole row (the caller's array would round-trip memory)
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    for (int64_t blk = 0; blk < nb; ++blk) {
      const KBlock kb = Q4 ? prep_q4(k + blk * 16) : prep_q8(k + blk * 32);
      const float kd = kscales[blk];
      for (int r = 0; r < RB; ++r) {
        const IV b = bias((Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8);
        const IV sums = apply(q[r]->q + blk * 32, kb, b);  // a prepared block is the same for q8 and q4
        acc[r] = FS::fma(to_float(sums), FS::splat(q[r]->d[blk] * kd), acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = acc[r];
  }
#else
#error "no integer dot product for this instruction set"
#endif
};

#endif  // XSIMD_NO_SUPPORTED_ARCHITECTURE

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
