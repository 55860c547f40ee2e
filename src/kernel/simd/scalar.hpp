// The scalar row's primitives (kernel/simd.hpp says what a file of kernel/simd/ defines), and those
// of code built outside a kernel translation unit: plain loops. Simd<ScalarArch> itself is in
// kernel/simd.hpp (every kernel's scalar paths use it); no vector Simd<Arch> is defined here.
#pragma once

#include "base/arch_namespace.hpp"
#include "kernel/simd.hpp"

#include <cstdint>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

inline void transpose4x4(const float* const rows[4], float* dst, int64_t dst_stride) {
  transpose4x4_loop(rows, dst, dst_stride);
}

// dst[m * dst_stride + i] = rows[i][m] for i, m < N, N a multiple of 4: 4x4 blocks.
template <int N>
inline void transpose_block(const float* const rows[N], float* dst, int64_t dst_stride) {
  transpose_by_4x4<N>(rows, dst, dst_stride, transpose4x4_loop);
}

// Bit j set where p[j] != 0, for j < n <= 64 (bytes past n are not read).
inline uint64_t nonzero_byte_bits(const uint8_t* p, int64_t n) {
  uint64_t bits = 0;
  for (int64_t j = 0; j < n; ++j) bits |= uint64_t(p[j] != 0) << j;
  return bits;
}

// out[j] = 0 where bytes[j] == 0: none done here (returns 0), the caller's loop, which the compiler
// vectorises, does them all.
inline int64_t clear_where_zero(const uint8_t* __restrict, float* __restrict, int64_t) { return 0; }

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
