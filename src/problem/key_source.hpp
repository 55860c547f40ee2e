// Where the keys and values of one call live and in what form: the one description that
// attention() (a dense tensor) and a KV cache (its block, ring or pages) give make_problem, and that
// the kernels and the reference read rows through (docs/semantics.md, "KV cache"). A new storage kind
// or cache dtype changes this type and the cache, not the validator or the kernels' addressing.
#pragma once

#include <algorithm>
#include <cstdint>

#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

class RopeRotation;  // problem/rope.hpp

// Bits per stored value of a cache dtype (maskattn/kv_types.inc).
constexpr int kv_type_bits(KVType t) {
  switch (t) {
#define MASKATTN_KV_TYPE(name, bits) case KVType::name: return bits;
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
  }
  return 0;
}
// Bytes a row stride counts in: a float, a 16-bit value, or a byte (quantized rows).
constexpr int64_t kv_unit_bytes(KVType t) { return kv_type_bits(t) >= 16 ? kv_type_bits(t) / 8 : 1; }

// A count of keys or positions beyond any a call has (they stop at 2^31), with room to add a few
// such counts without overflow: "unbounded" for runs and window reaches.
constexpr int64_t kBeyondAnyKey = int64_t(1) << 40;

// Element strides of a [B, H, L, D] view whose innermost stride is 1.
struct RowMajor3 {
  int64_t b = 0, h = 0, l = 0;
};

struct KeySource {
  // The logical shape: K [B, H, Lk, D], V [B, H, Lk, Dv].
  int64_t B = 0, H = 0, Lk = 0, D = 0, Dv = 0;
  // Rows of k_type / v_type (kernel/quant.hpp formats). k, v: the block holding them (null when
  // paged, or when there are no rows); strides in the dtype's own units (kv_unit_bytes): floats, 16-bit values, or bytes
  // (q8, q4). keys_rotated: stored keys are R·k (the kernel rotates the queries the same way).
  KVType k_type = KVType::f32, v_type = KVType::f32;
  const void* k = nullptr;
  const void* v = nullptr;
  RowMajor3 ks, vs;
  bool keys_rotated = false;
  // Pages: slot s of sequence b is row s % page_keys of page k_pages / v_pages[b * pages_per_seq +
  // s / page_keys] (strides .h within a page, .l a row). Null = the one block above.
  const uint8_t* const* k_pages = nullptr;
  const uint8_t* const* v_pages = nullptr;
  int64_t page_keys = 0, pages_per_seq = 0;

  // ---- A KV cache (null / 0 for a dense tensor)
  // lengths[b]: the positions sequence b has seen (the key_lengths rule; Lk is their maximum).
  // first[b]: the lowest window position still held (a ring overwrites older ones); positions below
  // min(sink_tokens, first[b]) are held too. sink_tokens: the cache's first positions, kept
  // whatever the window (not Options::sinks, which are learned per-head logits).
  const int32_t* lengths = nullptr;
  const int32_t* first = nullptr;
  int64_t sink_tokens = 0;
  // A sliding-window ring: `window` positions visible per query; ring slots after the
  // `sink_tokens` fixed ones.
  int64_t window = 0, ring = 0;
  // Keys stored rotated by this RoPE (its Rope and frequencies, made once): the queries turn at their
  // positions.
  const RopeRotation* rope = nullptr;
  // A cache's semantics: per-sequence lengths, the `uniform` policy averaging only held positions.
  bool is_cache() const { return lengths != nullptr; }

  // The most positions one sequence holds: Lk, or a ring's slots (its Lk counts tokens seen, up to
  // 2^31 - 1: scratch, tiles and chunks are sized by this, never by Lk).
  int64_t held_keys() const { return ring ? std::min(Lk, sink_tokens + ring) : Lk; }
  // Whether storage holds position j of sequence b (a ring has overwritten [sink_tokens, first[b])).
  bool holds(int64_t b, int64_t j) const {
    if (!first) return true;
    return j < std::min<int64_t>(sink_tokens, first[b]) || j >= first[b];
  }
  int64_t slot(int64_t j) const { return ring && j >= sink_tokens ? sink_tokens + (j - sink_tokens) % ring : j; }
  // How many keys from j on have consecutive rows in memory (a ring's wrap, the end of the fixed
  // slots and a page's end cut runs): the decode kernel's tiles never cross such a cut.
  int64_t contiguous_keys(int64_t j) const {
    int64_t run = kBeyondAnyKey;  // no overflow in j + run
    const int64_t s = slot(j);
    if (ring) run = j < sink_tokens ? sink_tokens - j : sink_tokens + ring - s;
    if (page_keys) run = std::min(run, page_keys - s % page_keys);
    return run;
  }
  // K/V rows of key j in storage (strides in their own units: kv_unit_bytes).
  const void* key_row(int64_t b, int64_t h, int64_t j) const { return row(k, k_pages, k_type, ks, b, h, j); }
  const void* value_row(int64_t b, int64_t h, int64_t j) const { return row(v, v_pages, v_type, vs, b, h, j); }
  // Plain float K and V in one block, in position order: what the reference reads in place.
  bool dense_float() const { return k_type == KVType::f32 && v_type == KVType::f32 && !k_pages && !ring && !keys_rotated; }

 private:
  const void* row(const void* base, const uint8_t* const* pages, KVType t, const RowMajor3& s, int64_t b,
                  int64_t h, int64_t j) const {
    const int64_t at = slot(j);
    int64_t off = b * s.b + h * s.h + at * s.l;
    if (pages) {
      base = pages[b * pages_per_seq + at / page_keys];
      off = h * s.h + (at % page_keys) * s.l;
    }
    // D = 0 or Dv = 0: a tensor with no elements may have no buffer, and its rows are never read
    // (no offset is added to a null pointer: UBSan, via the fuzzer, B=1 Hq=3 Lq=4 Lk=41 D=0 Dv=19).
    if (!base) return nullptr;
    return static_cast<const uint8_t*>(base) + off * kv_unit_bytes(t);
  }
};

}  // namespace maskattn::detail
