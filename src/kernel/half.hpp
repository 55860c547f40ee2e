// The 16-bit float formats of the KV cache in scalar code, both ways: IEEE binary16 (float16) and
// bfloat16. The one definition that the kernels' tails, the prefill packing and the KV cache share
// (the vector forms are Simd<Arch>::load(const uint16_t*) and load(const Bf16*)).
#pragma once

#include "base/arch_namespace.hpp"

#include <cstdint>
#include <cstring>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// IEEE binary16 bits to float (exact): the 15 exponent+mantissa bits shifted into a float's and
// scaled by 2^112 rebias the exponent and handle subnormals; infinities and NaN keep their class.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
  } else {
    float f;
    const uint32_t shifted = em << 13;
    std::memcpy(&f, &shifted, 4);
    f *= 0x1p112f;
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// float to IEEE binary16 bits: round to nearest even, subnormals and infinities included, NaN kept
// (quiet, its sign and leading payload bits).
inline uint16_t float_to_half_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u, a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN (quiet)
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to infinity (or is one)
  if (a >= 0x38800000u) {  // a normal half: rebias the exponent (127 -> 15), round the 13 dropped bits
    uint32_t r = a - 0x38000000u;
    r += 0x0fffu + ((r >> 13) & 1u);  // to nearest, ties to even (a carry may bump the exponent)
    return uint16_t(sign | (r >> 13));
  }
  if (a < 0x33000000u) return uint16_t(sign);  // below 2^-25 (or exactly: a tie to even 0)
  // A subnormal half: the value in units of 2^-24 is the 24-bit mantissa shifted right.
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// bfloat16: a float's upper 16 bits (its sign, all 8 exponent bits, 7 mantissa bits), so it
// becomes float by a 16-bit shift, exactly, and has float's range with 8 significant bits.
// The kernels load a row of them as Bf16 (a distinct type from float16's uint16_t halves).
struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2, "rows of bfloat16 are arrays of 16-bit values");

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// float to bfloat16 bits: round to nearest even (a carry may reach the exponent, up to infinity),
// NaN kept (made quiet: truncating could leave a NaN's payload bits all zero, an infinity).
inline uint16_t float_to_bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x0040u);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
