// The AVX2 conversions the avx2 and avx512vnni integer dot products share: q4 nibbles in element
// order, and 16 stored values to float vectors of the kernel's width (8, or 16 where AVX-512F is on).
#pragma once

#include "kernel/quant_dot.hpp"

#include <immintrin.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

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
      // Nibble n to the float n - 8 by a 16-entry table: vpermps reads only an index's low 4 bits,
      // so one instruction stands for mask, subtract and convert (the same values, exactly).
      const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
      const __m512i x = _mm512_cvtepu8_epi32(b);
      lo[0] = V(_mm512_permutexvar_ps(x, table));
      hi[0] = V(_mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), table));
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

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
