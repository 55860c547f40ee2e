// Integer dot products of the avx2 target, and of the avx512 target (AVX-512F without VNNI/BW: its
// int_dot column names this file): vpmaddubsw + vpmaddwd on ymm (q8: |k| and sign(q, k)).
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
  static constexpr bool kPvTile = false;
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
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
