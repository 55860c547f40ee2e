// The 128-bit SSE forms that x86 and WebAssembly share (kernel/simd/x86.hpp, kernel/simd/wasm.hpp):
// Emscripten's SSE headers lower these intrinsics to SIMD128 one for one (i32x4.shuffle, widening,
// bitmask), so both instruction sets run the same source. Only those two files include it.
#pragma once

#include "base/arch_namespace.hpp"

#include <cstdint>

#include <immintrin.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {
namespace sse {

// dst[m * dst_stride + i] = rows[i][m] for i, m < 4: a 4x4 block transposed, for packing K and Q
// rows into the micro-tiles' [d][keys] / [d][rows] layouts. Four 128-bit loads, eight shuffles and
// four stores instead of sixteen strided scalar stores.
inline void transpose4x4(const float* const rows[4], float* dst, int64_t dst_stride) {
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
}

// 4 IEEE halves zero-extended into int32 lanes (for Simd::from_half_bits): integer unpacking, as
// SSE2 has no conversion instruction.
inline __m128i halves4(const uint16_t* p) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm_unpacklo_epi16(h, _mm_setzero_si128());
}

// 4 bfloat16 values to floats: one unpack with zeros puts each in its float's upper half.
inline __m128 bf16s4(const uint16_t* u) {
  return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u))));
}

// The lanes whose int32 has bit `bit` set, as a float mask: an and and a compare.
inline __m128 bit_set4(__m128i w, int bit) {
  const __m128i c = _mm_set1_epi32(int32_t(1u << bit));
  return _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(w, c), c));
}

}  // namespace sse
}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
