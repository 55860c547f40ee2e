// Integer dot products of the neon64 target: smull/smlal2 + sadalp on int8, or sdot where the
// compiler targets dotprod. P·V dequantizes V through memory.
#pragma once

#include "kernel/quant_dot.hpp"

#include <arm_neon.h>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// A key block loaded once for every row (BlockDot128 in kernel/quant_dot.hpp runs the loop); q4
// nibbles stay unsigned, their -8 is in the row's constant terms.
template <class Arch>
struct Neon64Ops {
  static constexpr bool kIntegerValues = false;
  using FV = typename Simd<Arch>::V;
  using Row = QueryRow<int8_t>;
  using IV = int32x4_t;
  struct KBlock { int8x16_t v[2]; };
  static IV bias(const int32_t* p) { return vld1q_s32(p); }
  static IV zero() { return vdupq_n_s32(0); }
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
};

template <class Arch>
struct QuantDot : DequantThroughMemory<Simd<Arch>>, BlockDot128<Arch, Neon64Ops<Arch>> {};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
