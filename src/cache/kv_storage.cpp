// The element conversions of the cache dtypes (float16 and bfloat16 both ways) and what the dtypes
// are (names, earlier spellings, kv_type_info), from maskattn/kv_types.inc and the row traits; a
// checked configuration's storage (KVCache::Impl::lay_out).
#include <cassert>
#include <cstring>

#include "cache/kv_storage.hpp"
#include "kernel/half.hpp"
#include "kernel/quant.hpp"
#include "maskattn/maskattn.hpp"  // with maskattn/kv_cache.hpp

namespace maskattn {

void KVCache::Impl::lay_out(const KVCacheConfig& c) {
  const KVType kt = *c.key_dtype, vt = *c.value_dtype;
  // hadamard was checked against the dtype; automatic rotates only where the traits ask, which is
  // only ever for quantized keys (the rotation is undone on dequantized rows).
  const bool rotated_keys = c.key_rotation == KeyRotation::hadamard ||
                            (c.key_rotation == KeyRotation::automatic && detail::rotates_keys(kt) && c.head_dim % 2 == 0);
  assert(!rotated_keys || detail::is_quantized(kt));
  const int64_t kb = detail::stored_row_bytes(kt, c.head_dim), vb = detail::stored_row_bytes(vt, c.value_dim);
  if (c.page_size > 0) {
    const int64_t pk = detail::checked_elements({c.kv_heads, c.page_size, kb}, 1, "page_size");
    const int64_t pv = detail::checked_elements({c.kv_heads, c.page_size, vb}, 1, "page_size");
    k_page_bytes = (pk + 63) / 64 * 64;  // V rows start on a cache line
    page_bytes = detail::checked_elements({k_page_bytes + pv}, 1, "page_size");
    pages_per_seq = (c.capacity + c.page_size - 1) / c.page_size;
    detail::checked_elements({c.batch, pages_per_seq}, 2 * sizeof(void*) + 4, "capacity");
    table.assign(size_t(c.batch * pages_per_seq), -1);
    k_pages.assign(table.size(), nullptr);
    v_pages.assign(table.size(), nullptr);
  } else {
    const int64_t k_bytes = detail::checked_elements({c.batch, c.kv_heads, c.capacity, kb}, 1, "capacity");
    const int64_t v_bytes = detail::checked_elements({c.batch, c.kv_heads, c.capacity, vb}, 1, "capacity");
    detail::checked_elements({k_bytes + v_bytes}, 1, "capacity");
    k.assign(size_t(k_bytes), 0);
    v.assign(size_t(v_bytes), 0);
  }
  cfg = c;
  ktype = kt;
  vtype = vt;
  rotated = rotated_keys;
  if (c.rope) rope.emplace(*c.rope);
  k_row_bytes = kb;
  v_row_bytes = vb;
  lengths.assign(size_t(c.batch), 0);
  first.assign(size_t(c.batch), 0);
  place_rows();
}

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
