// The x86 rows' primitives (kernel/simd.hpp says what a file of kernel/simd/ defines): SSE2, AVX2
// with F16C and AVX-512, one source whose branches are picked by the row's vector width and the
// instructions its compile flags enable (src/include/maskattn/targets.inc).
#pragma once

#include "base/arch_namespace.hpp"
#include "kernel/simd.hpp"
#include "kernel/simd/sse.hpp"

#include <cstdint>

#include <immintrin.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// SSE on every x86 row (the wider ones encode it as VEX).
inline void transpose4x4(const float* const rows[4], float* dst, int64_t dst_stride) {
  sse::transpose4x4(rows, dst, dst_stride);
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
  transpose_by_4x4<N>(rows, dst, dst_stride, sse::transpose4x4);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Bit j set where p[j] != 0, for j < n <= 64 (bytes past n are not read): a row of a boolean mask
// as the prefill kernel's tile bits. One masked load and test on AVX-512BW; 32 / 16 bytes a compare
// and movemask on AVX2 and SSE2.
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
  for (; j + 16 <= n; j += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j));
    bits |= uint64_t(~uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128()))) & 0xffffu) << j;
  }
  for (; j < n; ++j) bits |= uint64_t(p[j] != 0) << j;
  return bits;
#endif
}

// out[j] = 0 where bytes[j] == 0: none done here (returns 0), the caller's loop, which the compiler
// vectorises, does them all.
inline int64_t clear_where_zero(const uint8_t* __restrict, float* __restrict, int64_t) { return 0; }

template <class Arch>
struct Simd : SimdBatch<Arch, Simd<Arch>> {
  using B = SimdBatch<Arch, Simd<Arch>>;
  using V = typename B::V;
  using M = typename B::M;
  using I = typename B::I;
  static constexpr int W = B::W;
  using B::load;
  // Vector registers the tiles may use: 32 zmm with AVX-512, else 16.
  static constexpr int kRegisters = W >= 16 ? 32 : 16;

  // W IEEE halves to W floats: F16C / AVX-512 conversion where there is one, else integer unpacking.
  static V load(const uint16_t* p) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return V(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
#if defined(__F16C__)
    if constexpr (W == 8) return V(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
    if constexpr (W == 4) return B::from_half_bits(I(sse::halves4(p)));
    return B::load_halves(p);  // no conversion instruction for this width
  }
  // W bfloat16 values to W floats: a zero-extension and a 16-bit shift.
  static V load(const Bf16* p) {
    const auto* u = reinterpret_cast<const uint16_t*>(p);
#if defined(__AVX512F__)
    if constexpr (W == 16)
      return V(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u))), 16)));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8)
      return V(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u))), 16)));
#endif
    if constexpr (W == 4) return V(sse::bf16s4(u));
    return B::load_bf16s(u);  // no widening instruction for this width
  }

  // 2W bfloat16 values in one load, as two vectors in pair order. One instruction per vector: SSE2
  // and AVX2 unpack with zeros (each value in its float's upper half), AVX-512F, which has no 16-bit
  // unpack without AVX512BW, shifts the even values up and masks the odd ones. The in-order load()
  // is a widening move and a shift per vector. Pair order, by width:
  //   W = 4   in order: out[0] values 0-3, out[1] 4-7
  //   W = 8   AVX2 unpacks within 128-bit lanes: out[0] values 0-3 and 8-11, out[1] 4-7 and 12-15
  //   W = 16  out[0] the even values 0, 2, ... 30, out[1] the odd ones
  // A dot product reads its other operand in the same order (the decode kernel keeps a copy of the
  // query so), P·V its output columns (load_pair_order, store_pair_order).
  static constexpr bool kBf16Pairs = true;
  static void load_bf16_pair(const Bf16* p, V* out) {
#if defined(__AVX512F__)
    if constexpr (W == 16) {
      const __m512i x = _mm512_loadu_si512(p);
      out[0] = V(_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
      out[1] = V(_mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(int32_t(0xffff0000u)))));
      return;
    }
#endif
#if defined(__AVX2__)
    if constexpr (W == 8) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), zero = _mm256_setzero_si256();
      out[0] = V(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)));
      out[1] = V(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)));
      return;
    }
#endif
    if constexpr (W == 4) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), zero = _mm_setzero_si128();
      out[0] = V(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, x)));
      out[1] = V(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, x)));
    }
  }
  // 2W floats from p into pair order, and back (store_pair_order(p, x) after load_pair_order(p, x)
  // leaves p as it was).
  static void load_pair_order(const float* p, V* out) {
    const V a = B::load(p), b = B::load(p + W);
#if defined(__AVX512F__)
    if constexpr (W == 16) {
      out[0] = V(_mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b));
      out[1] = V(_mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b));
      return;
    }
#endif
#if defined(__AVX__)
    if constexpr (W == 8) {
      out[0] = V(_mm256_permute2f128_ps(a, b, 0x20));
      out[1] = V(_mm256_permute2f128_ps(a, b, 0x31));
      return;
    }
#endif
    out[0] = a;
    out[1] = b;
  }
  static void store_pair_order(float* p, const V* in) {
#if defined(__AVX512F__)
    if constexpr (W == 16) {
      B::store(p, V(_mm512_permutex2var_ps(in[0], _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), in[1])));
      B::store(p + W, V(_mm512_permutex2var_ps(in[0], _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), in[1])));
      return;
    }
#endif
#if defined(__AVX__)
    if constexpr (W == 8) {
      B::store(p, V(_mm256_permute2f128_ps(in[0], in[1], 0x20)));
      B::store(p + W, V(_mm256_permute2f128_ps(in[0], in[1], 0x31)));
      return;
    }
#endif
    B::store(p, in[0]);
    B::store(p + W, in[1]);
  }
  // One instruction or two: a test into a mask register (AVX-512), an and and a compare.
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
    if constexpr (W == 4) return M(sse::bit_set4(w, bit));
    return B::bit_set_generic(w, bit);
  }
  static uint32_t lane_bits(const M& m) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return uint32_t(__mmask16(m));
#endif
#if defined(__AVX__)
    if constexpr (W == 8) return uint32_t(_mm256_movemask_ps(m));
#endif
    if constexpr (W == 4) return uint32_t(_mm_movemask_ps(m));
    return B::lane_bits_generic(m);
  }
  static V fma(const V& a, const V& b, const V& c) { return xsimd::fma(a, b, c); }
  // x < acc ? acc : x lane-wise: a running maximum that takes a NaN `x` (the comparison is false for
  // NaN). A NaN already in `acc` may be replaced: the kernel does not rely on the max to carry NaN,
  // the row sum does. One instruction: maxps(acc, x) returns its second operand for a NaN.
  // (Do not test NaN with `x != x` here: xsimd 8.1's AVX `!=` is an ordered compare, false for NaN.)
  static V max_keep_nan(const V& acc, const V& x) { return xsimd::max(acc, x); }
  static V exponent_scale(const V& t) { return B::exponent_scale_generic(t); }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
