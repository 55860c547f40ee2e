// The element conversions of the cache dtypes (float16 and bfloat16 both ways) and the dtypes' names.
#include <cstring>

#include "kernel/half.hpp"
#include "maskattn/maskattn.hpp"  // with maskattn/kv_cache.hpp

namespace maskattn {

uint16_t float_to_half(float x) noexcept { return detail::float_to_half_bits(x); }
float half_to_float(uint16_t h) noexcept { return detail::half_bits_to_float(h); }
uint16_t float_to_bfloat16(float x) noexcept { return detail::float_to_bf16_bits(x); }
float bfloat16_to_float(uint16_t b) noexcept { return detail::bf16_bits_to_float(b); }

const char* kv_type_name(KVType t) noexcept {
  switch (t) {
#define MASKATTN_KV_TYPE(name, bits) case KVType::name: return #name;
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
  }
  return "?";
}

}  // namespace maskattn
