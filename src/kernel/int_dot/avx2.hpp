// Integer dot products of the avx2 target, and of the avx512 target (AVX-512F without VNNI/BW: its
// int_dot column names this file): vpmaddubsw + vpmaddwd on ymm (q8: |k| and sign(q, k)).
#pragma once

#include "kernel/int_dot/avx2_dequant.hpp"
#include "kernel/quant_dot.hpp"

#include <immintrin.h>

#include <cstring>

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
  static constexpr int32_t kQ8Offset = 0;  // so q8 keys add no constant term (dot, qk_tile)
  static constexpr bool kRequestsKeyRows = true;  // dot and qk_tile request rows ahead (quant_dot.hpp)
  static __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride,
                  int64_t ahead) {
    __m256 acc[RB];  // in registers for the whole row (the caller's array would round-trip memory)
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t scales_at = reinterpret_cast<const uint8_t*>(kscales) - k;
    for (int64_t blk = 0; blk < nb; ++blk) {
      request_key_block<Q4 ? 16 : 32>(k, ahead, blk, scales_at, nb);
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
        // q8's constant term is 0 (kQ8Offset): no load and add of bias8 per block and row.
        __m256i sums = _mm256_madd_epi16(pairs, ones);
        if constexpr (Q4) sums = _mm256_add_epi32(load(q[r]->bias4 + blk * 8), sums);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(q[r]->d[blk] * kd), acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = FV(acc[r]);
  }

  // Q·Kᵀ for 8 keys at a time with keys in lanes (kQkTile: the decode kernel's groups of 4 or more
  // rows, 4 a pass), as avx512vnni's qk_tile does with 16: per block each key's 8 dwords are
  // transposed (24 shuffles per 8 keys, shared by the rows) so that vector d holds dword d of the 8
  // keys, and a row then takes per dword a broadcast, vpsignb, vpmaddubsw, vpmaddwd and an add into
  // one accumulator: exact block sums with keys in lanes, scaled by a convert, a multiply and an fma
  // per block and 8 keys. Per key, block and row about 4.5 instructions where dot() spends 8 and a
  // lane reduction. The transposed dwords wait in memory (AVX2 has 16 registers), read as operands.
  static constexpr bool kQkTile[2] = {true, true};  // q8, q4
  template <int RB, bool Q4, int NB>  // NB: the block count when known at compile time, else 0
  static void qk_tile(const Row* const* q, const uint8_t* const* k, int64_t scales_at, int64_t nb_rt, float* s,
                      int64_t s_stride, int n_store, int64_t ahead) {
    const int64_t nb = NB ? NB : nb_rt;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 score[RB];
    for (int r = 0; r < RB; ++r) score[r] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < nb; ++blk) {
      for (int j = 0; j < 8; ++j) request_key_block<Q4 ? 16 : 32>(k[j], ahead, blk, scales_at, nb);
      __m256i t[8], ka[8];  // dword d of the 8 keys: as stored (q8: its signs; q4: the nibbles) and q8's |k|
      for (int j = 0; j < 8; ++j) t[j] = Q4 ? q4_nibbles(k[j] + blk * 16) : load(k[j] + blk * 32);
      transpose8(t);
      if constexpr (!Q4)
        for (int d = 0; d < 8; ++d) ka[d] = _mm256_abs_epi8(t[d]);
      alignas(32) float kd[8];
      for (int j = 0; j < 8; ++j) kd[j] = reinterpret_cast<const float*>(k[j] + scales_at)[blk];
      const __m256 kscale = _mm256_load_ps(kd);
      for (int r = 0; r < RB; ++r) {
        const int8_t* qb = q[r]->q + blk * 32;
        __m256i acc = Q4 ? _mm256_set1_epi32(q[r]->bias4[blk * 8]) : _mm256_setzero_si256();  // q8: kQ8Offset 0
        for (int d = 0; d < 8; ++d) {
          int32_t x;
          std::memcpy(&x, qb + 4 * d, 4);
          const __m256i qd = _mm256_set1_epi32(x);
          const __m256i pairs = Q4 ? _mm256_maddubs_epi16(t[d], qd) : _mm256_maddubs_epi16(ka[d], _mm256_sign_epi8(qd, t[d]));
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
        }
        score[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(kscale, _mm256_set1_ps(q[r]->d[blk])), score[r]);
      }
    }
    for (int r = 0; r < n_store; ++r) _mm256_storeu_ps(s + r * s_stride, score[r]);
  }

 private:
  // An 8 x 8 transpose of int32: t[d] lane j = t[j] lane d before.
  static void transpose8(__m256i (&t)[8]) {
    __m256i a[8], b[8];
    for (int i = 0; i < 4; ++i) {
      a[2 * i] = _mm256_unpacklo_epi32(t[2 * i], t[2 * i + 1]);
      a[2 * i + 1] = _mm256_unpackhi_epi32(t[2 * i], t[2 * i + 1]);
    }
    // b[4i + m], 128-bit lane L: dword 4L + m of rows 4i .. 4i + 3
    for (int i = 0; i < 2; ++i) {
      b[4 * i] = _mm256_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
      b[4 * i + 1] = _mm256_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
      b[4 * i + 2] = _mm256_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
      b[4 * i + 3] = _mm256_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int m = 0; m < 4; ++m) {
      t[m] = _mm256_permute2x128_si256(b[m], b[4 + m], 0x20);
      t[4 + m] = _mm256_permute2x128_si256(b[m], b[4 + m], 0x31);
    }
  }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
