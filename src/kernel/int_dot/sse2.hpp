// Integer dot products of the sse2 target: keys widened to int16, pmaddwd on queries prepared as
// int16. P·V dequantizes V through memory.
#pragma once

#include "kernel/quant_dot.hpp"

#include <immintrin.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// A key block widened to int16 once for every row (BlockDot128 in kernel/quant_dot.hpp runs the loop).
template <class Arch>
struct Sse2Ops {
  static constexpr bool kIntegerValues = false;
  using FV = typename Simd<Arch>::V;
  using Row = QueryRow<int16_t>;
  using IV = __m128i;
  struct KBlock { __m128i w[4]; };  // the 32 values as int16
  static __m128i load(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static IV bias(const int32_t* p) { return load(p); }
  static IV zero() { return _mm_setzero_si128(); }
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
};

template <class Arch>
struct QuantDot : DequantThroughMemory<Simd<Arch>>, BlockDot128<Arch, Sse2Ops<Arch>> {};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
