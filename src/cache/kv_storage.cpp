// The element conversions of the cache dtypes: float16 both ways and the dtypes' names.
#include <cstring>

#include "kernel/half.hpp"
#include "maskattn/maskattn.hpp"  // with maskattn/kv_cache.hpp

namespace maskattn {

uint16_t float_to_half(float x) noexcept {
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

float half_to_float(uint16_t h) noexcept { return detail::half_bits_to_float(h); }

const char* kv_type_name(KVType t) noexcept {
  switch (t) {
#define MASKATTN_KV_TYPE(name, bits) case KVType::name: return #name;
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
  }
  return "?";
}

}  // namespace maskattn
