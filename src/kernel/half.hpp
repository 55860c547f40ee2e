// IEEE binary16 to float, in scalar code: the one definition that the kernels' tails, the
// prefill packing and the KV cache share (the vector form is Simd<Arch>::load(const uint16_t*)).
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

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
