// The element conversions of the cache dtypes (float16 and bfloat16 both ways) and what the dtypes
// are (names, earlier spellings, kv_type_info), from maskattn/kv_types.inc and the row traits.
#include <cstring>

#include "kernel/half.hpp"
#include "kernel/quant.hpp"
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

KVTypeInfo kv_type_info(KVType t) noexcept {
  for (KVType known : kKVTypes)
    if (t == known)
      return detail::with_kv_type(t, [t](auto tr) {
        using Traits = decltype(tr);
        return KVTypeInfo{kv_type_name(t), detail::kv_type_bits(t), Traits::kQuantized, Traits::kRawBits};
      });
  return KVTypeInfo{"?", 0, false, false};
}

std::optional<KVType> kv_type_of(const char* name) noexcept {
  if (!name) return std::nullopt;
#define MASKATTN_KV_TYPE(name_, bits) if (std::strcmp(name, #name_) == 0) return KVType::name_;
#define MASKATTN_KV_TYPE_ALIAS(alias, name_) if (std::strcmp(name, #alias) == 0) return KVType::name_;
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE_ALIAS
#undef MASKATTN_KV_TYPE
  return std::nullopt;
}

}  // namespace maskattn
