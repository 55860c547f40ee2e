// Integer dot products of the avx512vnni target: vpdpbusd on zmm, two blocks of 32 per instruction
// (unsigned x signed bytes: keys biased by +128; the pair's two scale products broadcast to the
// halves with one vpermps). P·V dequantizes V with the AVX2/AVX-512F conversions.
#pragma once

#include "kernel/int_dot/avx2_dequant.hpp"
#include "kernel/quant_dot.hpp"

#include <immintrin.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <class Arch>
struct QuantDot : DequantAvx2<Arch> {
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
      if constexpr (Q4) {  // 32 bytes = two blocks' nibbles: [A lo, B lo | A hi, B hi] in one go:
        // the bytes in both halves (one broadcast load), the upper half shifted, then masked
        const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + blk * 16)));
        kv = _mm512_and_si512(_mm512_mask_srli_epi16(x, __mmask32(0xFFFF0000u), x, 4), _mm512_set1_epi8(15));
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

};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
