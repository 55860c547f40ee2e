// A KV cache's storage (KVCache::Impl): the rows of every sequence and head in their dtype's format
// (kernel/quant.hpp), in one block or in pages shared by forks; a ring's slots; rows written
// (appends, RoPE and the key rotation applied, then quantized) and read back; and the storage as a
// KeySource, what attend() reads (docs/semantics.md, "KV cache"). Its input is checked before it is
// called (problem/validate_cache.cpp); the public methods that call into it are api/kv_cache.cpp.
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cache_line.hpp"
#include "base/errors.hpp"
#include "kernel/half.hpp"
#include "kernel/quant.hpp"
#include "problem/key_source.hpp"
#include "problem/problem.hpp"
#include "problem/rope.hpp"
#include "maskattn/maskattn.hpp"  // with maskattn/kv_cache.hpp

namespace maskattn {
namespace detail {

// Units of a stored row that a stride counts: floats, halves, or bytes (quantized rows).
inline int64_t row_units(KVType t, int64_t n) { return is_quantized(t) ? stored_row_bytes(t, n) : n; }

}  // namespace detail

struct KVCache::Impl {
  KVCacheConfig cfg;                // dtypes resolved
  KVType ktype = KVType::float32, vtype = KVType::float32;
  bool rotated = false;             // keys stored as R·k (kernel/quant.hpp)
  std::optional<detail::RopeRotation> rope;  // cfg.rope's frequencies, made once (copied per call)
  int64_t k_row_bytes = 0, v_row_bytes = 0;
  // Contiguous layout: [B, Hkv, capacity] rows of K and of V, in their dtype's format
  // (kernel/quant.hpp), each starting on a cache line (base/cache_line.hpp).
  detail::LineBytes k, v;
  std::vector<int32_t> lengths;     // tokens seen per sequence (absolute positions)
  std::vector<int32_t> first;       // lowest window position still held (a ring overwrites older ones)

  // Paged layout (page_size P > 0): a page holds P slots of every head, K rows [Hkv, P] then V rows
  // [Hkv, P]. table[b * pages_per_seq + s / P] is the page of slot s of sequence b (-1 = none yet);
  // refs counts the sequences sharing a page (fork), and a write into a shared page copies it first.
  int64_t pages_per_seq = 0, k_page_bytes = 0, page_bytes = 0;
  std::vector<detail::LineBytes> pool;  // each page on a cache line
  std::vector<int32_t> refs, free_pages, table;
  std::vector<const uint8_t*> k_pages, v_pages;  // the kernels' view of `table`: [B * pages_per_seq]

  int64_t D() const { return cfg.head_dim; }
  int64_t Dv() const { return cfg.value_dim; }
  int64_t cap() const { return cfg.capacity; }
  int64_t P() const { return cfg.page_size; }
  bool paged() const { return cfg.page_size > 0; }
  bool ring() const { return cfg.window > 0; }
  int64_t sinks() const { return cfg.sink_tokens; }
  // Slot of a position: sink tokens keep theirs, later positions cycle through the ring's slots.
  int64_t slot(int64_t pos) const { return layout.slot(pos); }
  // Positions sequence b holds below `first` (sink tokens once the window has moved past them).
  int64_t lead(int64_t b) const { return std::min<int64_t>(sinks(), first[size_t(b)]); }

  // The stored row of position `pos` of (b, h) in K or V: addressed as attend() addresses it.
  const uint8_t* row(bool key, int64_t b, int64_t h, int64_t pos) const {
    return static_cast<const uint8_t*>(key ? layout.key_row(b, h, pos) : layout.value_row(b, h, pos));
  }
  // For writing: the caller made the page writable first (own_page).
  uint8_t* row(bool key, int64_t b, int64_t h, int64_t pos) { return const_cast<uint8_t*>(std::as_const(*this).row(key, b, h, pos)); }

  // ---- pages
  void point(int64_t at) {
    const int32_t e = table[size_t(at)];
    k_pages[size_t(at)] = e < 0 ? nullptr : pool[size_t(e)].data();
    v_pages[size_t(at)] = e < 0 ? nullptr : pool[size_t(e)].data() + k_page_bytes;
  }
  int32_t new_page() {
    if (!free_pages.empty()) {
      const int32_t e = free_pages.back();
      free_pages.pop_back();
      refs[size_t(e)] = 1;
      return e;
    }
    // Everything that may throw first (the page, room in every list), so a bad_alloc changes
    // nothing; free_pages can then never grow past pool.size(): release_page cannot throw.
    detail::LineBytes page(static_cast<size_t>(page_bytes));  // zeroed
    pool.reserve(pool.size() + 1);
    refs.reserve(pool.size() + 1);
    free_pages.reserve(pool.size() + 1);
    pool.push_back(std::move(page));
    refs.push_back(1);
    return int32_t(pool.size() - 1);
  }
  // Makes the page holding slot s of sequence b this sequence's own: allocated, and copied first when
  // shared. Contents do not change, so a bad_alloc part-way leaves the cache as it was.
  void own_page(int64_t b, int64_t s) {
    const int64_t at = b * pages_per_seq + s / P();
    int32_t& e = table[size_t(at)];
    if (e < 0) {
      const int32_t n = new_page();
      table[size_t(at)] = n;
    } else if (refs[size_t(e)] > 1) {
      const int32_t n = new_page();  // may reallocate pool: index again below
      std::memcpy(pool[size_t(n)].data(), pool[size_t(table[size_t(at)])].data(), size_t(page_bytes));
      --refs[size_t(table[size_t(at)])];
      table[size_t(at)] = n;
    }
    point(at);
  }
  // Every page positions [from, to) of sequence b will be written to, made its own first: a new
  // page wherever the slots jump (the first position, a page boundary, a ring's wrap back to slot
  // sinks(), which need not be a page boundary).
  void own_positions(int64_t b, int64_t from, int64_t to) {
    if (!paged()) return;
    for (int64_t pos = from; pos < to; ++pos)
      if (pos == from || slot(pos) % P() == 0 || slot(pos) != slot(pos - 1) + 1) own_page(b, slot(pos));
  }
  void release_page(int64_t at) {
    const int32_t e = table[size_t(at)];
    if (e < 0) return;
    if (--refs[size_t(e)] == 0) free_pages.push_back(e);
    table[size_t(at)] = -1;
    point(at);
  }
  // Pages of sequence b past what its first `length` positions use (a ring uses every slot it reached).
  void release_after(int64_t b, int64_t length) {
    if (!paged()) return;
    const int64_t used_slots = ring() ? std::min<int64_t>(length, cap()) : length;
    for (int64_t i = (used_slots + P() - 1) / P(); i < pages_per_seq; ++i) release_page(b * pages_per_seq + i);
  }

  // Copies the new positions in, converting each row to the cache's format (float16 rounding,
  // rotation and quantization for q8/q4).
  // New positions [0, n) of sequence b that stay in the cache: a ring keeps its sink tokens and only
  // the newest (capacity - sink_tokens) others, so older new ones would be overwritten anyway.
  bool kept(int64_t b, int64_t i, int64_t n) const {
    if (!ring()) return true;
    const int64_t pos = lengths[size_t(b)] + i, end = lengths[size_t(b)] + n;
    return pos < sinks() || pos >= end - (cap() - sinks());
  }
  // The next kept new position at or after i (n if none): a long append into a ring visits only
  // the rows it keeps, so its cost is bounded by the capacity, not by the tokens given.
  int64_t next_kept(int64_t b, int64_t i, int64_t n) const {
    if (!ring() || i >= n || kept(b, i, n)) return std::min(i, n);
    return std::min(n, n - (cap() - sinks()));  // past i: i is not kept, so it lies below this
  }
  // Pages every kept new position will be written to, made writable before anything is written.
  void own_new_positions(const std::vector<int32_t>& take) {
    if (!paged()) return;
    for (int64_t b = 0; b < cfg.batch; ++b)
      for (int64_t i = next_kept(b, 0, take[size_t(b)]); i < take[size_t(b)]; i = next_kept(b, i + 1, take[size_t(b)])) {
        const int64_t pos = lengths[size_t(b)] + i, s = slot(pos);
        if (i == 0 || s % P() == 0 || !kept(b, i - 1, take[size_t(b)]) || s != slot(pos - 1) + 1) own_page(b, s);
      }
  }

  // One row of floats (scratch: it may be changed) into the cache's format at `to`: the Hadamard
  // rotation first for rotated keys (q8/q4), then the dtype's encoding (rounding, quantization).
  void encode_row(bool key, float* scratch, uint8_t* to) const {
    if (key && rotated) detail::rotate(scratch, D());
    detail::encode_stored_row(key ? ktype : vtype, scratch, key ? D() : Dv(), to);
  }

  // Keys with RoPE are rotated by their absolute position (+ offset) first, then stored as above.
  template <class In>
  void write(const TensorView<const In>& src, bool key, const std::vector<int32_t>& take) {
    const int64_t width = key ? D() : Dv();
    std::vector<float> scratch(static_cast<size_t>(width));
    // The cache's own rotation, whose run carries over from one append to the next: token-by-token
    // appends step its angles instead of taking a cos and a sin per pair (RopeRotation::at_in_run).
    detail::RopeRotation* rope = key && this->rope ? &*this->rope : nullptr;
    if (rope) rope->prepare_runs(detail::RopeRotation::kRun);  // allocations (the first time) before any write
    for (int64_t b = 0; b < cfg.batch; ++b) {
      const int64_t n = take[size_t(b)];
      // A length-dependent scaling (dynamic, longrope) rotates an append's keys with the frequencies
      // of the length the sequence reaches by it, as a model's forward pass over those tokens does.
      if (rope) rope->set_length(lengths[size_t(b)] + n + rope->offset());
      for (int64_t i = next_kept(b, 0, n); i < n; i = next_kept(b, i + 1, n)) {
        const int64_t pos = lengths[size_t(b)] + i;
        if (rope) rope->at_in_run(pos + rope->offset());
        for (int64_t h = 0; h < cfg.kv_heads; ++h) {
          const In* from = src.data + b * src.strides[0] + h * src.strides[1] + i * src.strides[2];
          uint8_t* to = row(key, b, h, pos);
          if constexpr (std::is_same_v<In, uint16_t>) {  // the 16-bit format's own bits (float16, bfloat16)
            if (!rope) {
              std::memcpy(to, from, size_t(width) * 2);
              continue;
            }
            detail::row_to_float(key ? ktype : vtype, from, width, false, scratch.data());
            rope->rotate(scratch.data(), scratch.data(), width);
          } else if (detail::reads_directly(key ? ktype : vtype)) {  // float32 rows: nothing to encode
            if (rope) rope->rotate(from, reinterpret_cast<float*>(to), width);  // rotated straight into place
            else std::memcpy(to, from, size_t(width) * 4);
            continue;
          } else if (rope) {  // rotated into the row's scratch, then rounded or quantized from there
            rope->rotate(from, scratch.data(), width);
          } else {
            std::memcpy(scratch.data(), from, size_t(width) * 4);
          }
          encode_row(key, scratch.data(), to);
        }
      }
    }
  }

  // The storage of a checked configuration (check_cache_config): its rows' sizes, its block or its
  // page table, the keys' rotation and RoPE. Fails naming capacity or page_size when the storage
  // would not fit in memory.
  void lay_out(const KVCacheConfig& checked);

  // Where each position's rows live, their dtypes, what each sequence holds and the keys' RoPE, as
  // the KeySource that row() and attend() both read (docs/semantics.md, "KV cache"). Set once the
  // storage exists (the constructor): every pointer in it stays valid for the cache's life.
  detail::KeySource layout;
  void place_rows() {
    detail::KeySource& s = layout;
    s.B = cfg.batch; s.H = cfg.kv_heads; s.D = D(); s.Dv = Dv();
    s.k_type = ktype; s.v_type = vtype; s.keys_rotated = rotated;
    const int64_t ku = detail::row_units(ktype, D()), vu = detail::row_units(vtype, Dv());
    if (paged()) {
      s.k_pages = k_pages.data(); s.v_pages = v_pages.data();
      s.page_keys = P(); s.pages_per_seq = pages_per_seq;
      s.ks = {0, P() * ku, ku}; s.vs = {0, P() * vu, vu};
    } else {
      s.k = k.data(); s.v = v.data();
      s.ks = {s.H * cap() * ku, cap() * ku, ku}; s.vs = {s.H * cap() * vu, cap() * vu, vu};
    }
    s.lengths = lengths.data(); s.first = first.data();
    if (ring()) { s.sink_tokens = sinks(); s.ring = cap() - sinks(); s.window = cfg.window; }
    if (rope) s.rope = &*rope;
  }
  // What attend() reads: the layout with the longest sequence as Lk.
  detail::KeySource key_source() const {
    detail::KeySource s = layout;
    s.Lk = *std::max_element(lengths.begin(), lengths.end());
    return s;
  }

  // Row j of sequence b, head h as floats (dequantized, unrotated).
  void read_row(bool key, int64_t b, int64_t h, int64_t j, float* out) const {
    if (key) detail::row_to_float(ktype, row(true, b, h, j), D(), rotated, out);
    else detail::row_to_float(vtype, row(false, b, h, j), Dv(), false, out);
  }

  void advance(const std::vector<int32_t>& take) {
    for (int64_t b = 0; b < cfg.batch; ++b) {
      lengths[size_t(b)] += take[size_t(b)];
      // The ring's slots hold the newest (capacity - sinks) positions from `sinks` on.
      const int64_t oldest = lengths[size_t(b)] - (cap() - sinks());
      if (ring() && oldest > sinks()) first[size_t(b)] = int32_t(std::max<int64_t>(first[size_t(b)], oldest));
    }
  }

  template <class In>
  void append(const TensorView<const In>& k_in, const TensorView<const In>& v_in, Span<int32_t> counts) {
    std::vector<int32_t> take;
    detail::check_append(k_in, v_in, counts, cfg, lengths, take);
    own_new_positions(take);
    write(k_in, true, take);
    write(v_in, false, take);
    advance(take);
  }

  // Copies the rows of position `from` to position `to` (every head, K and V) within sequence b
  // (the page of `to` already owned). With RoPE (`rope` and a scratch row of D floats, made before
  // anything moves) the key rows are re-rotated from `from`'s angle to `to`'s: stored at their new
  // position's angle (f16, q8 and q4 rows are rounded or quantized again).
  void move_row(int64_t b, int64_t from, int64_t to, detail::RopeRotation* rope, float* scratch) {
    if (rope) rope->between(from, to);
    for (int64_t h = 0; h < cfg.kv_heads; ++h) {
      if (rope) {
        read_row(true, b, h, from, scratch);
        rope->rotate(scratch, scratch, D(), false);  // a turn: the stored row is scaled already
        encode_row(true, scratch, row(true, b, h, to));
      } else {
        std::memmove(row(true, b, h, to), row(true, b, h, from), size_t(k_row_bytes));
      }
      std::memmove(row(false, b, h, to), row(false, b, h, from), size_t(v_row_bytes));
    }
  }
};

}  // namespace maskattn
