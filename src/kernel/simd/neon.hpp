// The AArch64 NEON row's primitives (kernel/simd.hpp says what a file of kernel/simd/ defines).
// NEON has no movemask and no 4x4 transpose of its own here (no ARM hardware to measure a
// substitute): the scalar row's plain loops serve (transposes, byte bits, clear_where_zero).
#pragma once

#include "base/arch_namespace.hpp"
#include "kernel/simd.hpp"
#include "kernel/simd/scalar.hpp"

#include <cstdint>

#include <arm_neon.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <class Arch>
struct Simd : SimdBatch<Arch, Simd<Arch>> {
  using B = SimdBatch<Arch, Simd<Arch>>;
  using V = typename B::V;
  using M = typename B::M;
  using I = typename B::I;
  static constexpr int W = B::W;
  static_assert(W == 4, "NEON is 4 float lanes");
  using B::load;
  // AArch64: 32 128-bit vector registers (v0-v31), and FMA is baseline.
  static constexpr int kRegisters = 32;

  // fcvtl: exact for every half (subnormals too); a signalling NaN comes out quiet, as with F16C.
  static V load(const uint16_t* p) { return V(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))); }
  // One shifting widen: each bfloat16 is its float's upper half.
  static V load(const Bf16* p) {
    return V(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16)));
  }
  static M bit_set(const I& w, int bit) { return M(vtstq_u32(vreinterpretq_u32_s32(w), vdupq_n_u32(1u << bit))); }
  static uint32_t lane_bits(const M& m) { return B::lane_bits_generic(m); }
  static V fma(const V& a, const V& b, const V& c) { return xsimd::fma(a, b, c); }
  // x < acc ? acc : x lane-wise for a NaN `x`: vmaxq propagates NaN (a NaN in `acc` may stay; the
  // row sum carries NaN, not the max).
  static V max_keep_nan(const V& acc, const V& x) { return xsimd::max(acc, x); }
  // xsimd 8.1's NEON bitwise_cast goes through a table of function pointers, which g++ 12 leaves
  // as two calls per exp2 (objdump): reinterpret directly.
  static V exponent_scale(const V& t) {
    const I scale_bits = I(vreinterpretq_s32_f32(t)) << 23;
    return V(vreinterpretq_f32_s32(scale_bits));
  }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
