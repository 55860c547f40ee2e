// KVCache: storage, appends in place, and attention over what the cache holds. Every public call
// validates everything before it writes anything (an append past capacity changes nothing).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>

#include "base/errors.hpp"
#include "kernel/half.hpp"
#include "kernel/quant.hpp"
#include "problem/problem.hpp"
#include "problem/rope.hpp"
#include "dispatch/targets.hpp"
#include "maskattn/maskattn.hpp"

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

namespace {
using detail::cat;
using detail::fail;
using detail::fail_type;

bool valid_type(KVType t) {
  switch (t) {
#define MASKATTN_KV_TYPE(name, bits) case KVType::name:
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
      return true;
  }
  return false;
}
// Units of a stored row that a stride counts: floats, halves, or bytes (quantized rows).
int64_t row_units(KVType t, int64_t n) {
  return detail::is_quantized(t) ? detail::stored_row_bytes(t, n) : n;
}

}  // namespace

struct KVCache::Impl {
  KVCacheConfig cfg;                // dtypes resolved
  KVType ktype = KVType::f32, vtype = KVType::f32;
  bool rotated = false;             // keys stored as R·k (kernel/quant.hpp)
  std::optional<detail::RopeRotation> rope;  // cfg.rope's frequencies, made once (copied per call)
  int64_t k_row_bytes = 0, v_row_bytes = 0;
  // Contiguous layout: [B, Hkv, capacity] rows of K and of V, in their dtype's format
  // (kernel/quant.hpp). uint8_t storage from operator new is aligned for floats and halves.
  std::vector<uint8_t> k, v;
  std::vector<int32_t> lengths;     // tokens seen per sequence (absolute positions)
  std::vector<int32_t> first;       // lowest window position still held (a ring overwrites older ones)

  // Paged layout (page_size P > 0): a page holds P slots of every head, K rows [Hkv, P] then V rows
  // [Hkv, P]. table[b * pages_per_seq + s / P] is the page of slot s of sequence b (-1 = none yet);
  // refs counts the sequences sharing a page (fork), and a write into a shared page copies it first.
  int64_t pages_per_seq = 0, k_page_bytes = 0, page_bytes = 0;
  std::vector<std::unique_ptr<uint8_t[]>> pool;
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
  int64_t slot(int64_t pos) const {
    if (!ring() || pos < sinks()) return pos;
    return sinks() + (pos - sinks()) % (cap() - sinks());
  }
  // Positions sequence b holds below `first` (sink tokens once the window has moved past them).
  int64_t lead(int64_t b) const { return std::min<int64_t>(sinks(), first[size_t(b)]); }

  // The stored row of position `pos` of (b, h) in K or V.
  const uint8_t* row(bool key, int64_t b, int64_t h, int64_t pos) const {
    const int64_t s = slot(pos), bytes = key ? k_row_bytes : v_row_bytes;
    if (!paged()) return (key ? k : v).data() + ((b * cfg.kv_heads + h) * cap() + s) * bytes;
    const uint8_t* page = (key ? k_pages : v_pages)[size_t(b * pages_per_seq + s / P())];
    return page + (h * P() + s % P()) * bytes;
  }
  // For writing: the caller made the page writable first (own_page).
  uint8_t* row(bool key, int64_t b, int64_t h, int64_t pos) { return const_cast<uint8_t*>(std::as_const(*this).row(key, b, h, pos)); }

  // ---- pages
  void point(int64_t at) {
    const int32_t e = table[size_t(at)];
    k_pages[size_t(at)] = e < 0 ? nullptr : pool[size_t(e)].get();
    v_pages[size_t(at)] = e < 0 ? nullptr : pool[size_t(e)].get() + k_page_bytes;
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
    auto page = std::make_unique<uint8_t[]>(size_t(page_bytes));  // zeroed
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
      std::memcpy(pool[size_t(n)].get(), pool[size_t(table[size_t(at)])].get(), size_t(page_bytes));
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

  template <class In>
  void check_append(const TensorView<const In>& k, const TensorView<const In>& v, Span<int32_t> counts,
                    std::vector<int32_t>& take) const {
    detail::check_view(k, "k");
    detail::check_view(v, "v");
    const int64_t B = cfg.batch, H = cfg.kv_heads;
    if (k.shape[0] != B || k.shape[1] != H || k.shape[3] != D())
      fail("k", cat("shape must be [B, Hkv, T, D] = [", B, ", ", H, ", T, ", D(), "], given [", k.shape[0], ", ",
                    k.shape[1], ", ", k.shape[2], ", ", k.shape[3], "]"));
    if (v.shape[0] != B || v.shape[1] != H || v.shape[2] != k.shape[2] || v.shape[3] != Dv())
      fail("v", cat("shape must be [B, Hkv, T, Dv] = [", B, ", ", H, ", ", k.shape[2], ", ", Dv(), "], given [",
                    v.shape[0], ", ", v.shape[1], ", ", v.shape[2], ", ", v.shape[3], "]"));
    const int64_t T = k.shape[2];
    if (!counts.empty() && int64_t(counts.size) != B)
      fail("counts", cat("length must be the batch size ", B, ", given ", counts.size));
    take.assign(size_t(B), 0);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = counts.empty() ? T : counts[size_t(b)];
      if (n < 0 || n > T) fail(cat("counts[", b, "]"), cat("must be in [0, T = ", T, "], given ", n));
      const int64_t after = int64_t(lengths[size_t(b)]) + n;
      if (!ring() && after > cap())
        fail(cat("sequence[", b, "]"),
             cat("sequence ", b, " holds ", lengths[size_t(b)], " positions; appending ", n, " would need ", after,
                 ", capacity is ", cap(), " (nothing was written; use a larger capacity, or a window for a ring)"));
      if (after > detail::kMaxSequenceLength)
        fail(cat("sequence[", b, "]"), cat("sequence ", b, " would reach ", after, " positions, the most is ",
                                           detail::kMaxSequenceLength));
      take[size_t(b)] = int32_t(n);
    }
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
  // Pages every kept new position will be written to, made writable before anything is written.
  void own_new_positions(const std::vector<int32_t>& take) {
    if (!paged()) return;
    for (int64_t b = 0; b < cfg.batch; ++b)
      for (int64_t i = 0; i < take[size_t(b)]; ++i)
        if (kept(b, i, take[size_t(b)])) {
          const int64_t pos = lengths[size_t(b)] + i, s = slot(pos);
          if (i == 0 || s % P() == 0 || !kept(b, i - 1, take[size_t(b)]) || s != slot(pos - 1) + 1) own_page(b, s);
        }
  }

  // One row of floats (scratch: it may be changed) into the cache's format at `to`: float16 rounding,
  // or the Hadamard rotation (keys, when rotated) and quantization for q8/q4.
  void encode_row(bool key, float* scratch, uint8_t* to) const {
    const KVType t = key ? ktype : vtype;
    const int64_t width = key ? D() : Dv();
    if (t == KVType::f32) {
      std::memcpy(to, scratch, size_t(width) * 4);
    } else if (t == KVType::f16) {
      auto* h16 = reinterpret_cast<uint16_t*>(to);
      for (int64_t c = 0; c < width; ++c) h16[c] = float_to_half(scratch[c]);
    } else {
      if (key && rotated) detail::rotate(scratch, width);
      detail::quantize_row(t, scratch, width, to);
    }
  }

  // Keys with RoPE are rotated by their absolute position (+ offset) first, then stored as above.
  template <class In>
  void write(const TensorView<const In>& src, bool key, const std::vector<int32_t>& take) {
    const int64_t width = key ? D() : Dv();
    std::vector<float> scratch(static_cast<size_t>(width));
    std::optional<detail::RopeRotation> rope;
    if (key && this->rope) {
      rope.emplace(*this->rope);
      rope->prepare_runs(*std::max_element(take.begin(), take.end()));  // allocations before any write
    }
    for (int64_t b = 0; b < cfg.batch; ++b) {
      const int64_t n = take[size_t(b)];
      int64_t run = -detail::RopeRotation::kRun;  // the first position of the current run of angles
      for (int64_t i = 0; i < n; ++i) {
        if (!kept(b, i, n)) continue;
        const int64_t pos = lengths[size_t(b)] + i;
        if (rope && i - run >= detail::RopeRotation::kRun) {
          run = i;
          rope->start_run(pos + rope->offset());
        } else if (rope) {
          rope->step_run(i - run);
        }
        for (int64_t h = 0; h < cfg.kv_heads; ++h) {
          const In* from = src.data + b * src.strides[0] + h * src.strides[1] + i * src.strides[2];
          uint8_t* to = row(key, b, h, pos);
          if constexpr (std::is_same_v<In, uint16_t>) {  // halves into a float16 cache
            if (!rope) {
              std::memcpy(to, from, size_t(width) * 2);
              continue;
            }
            for (int64_t c = 0; c < width; ++c) scratch[size_t(c)] = half_to_float(from[c]);
          } else {
            std::memcpy(scratch.data(), from, size_t(width) * 4);
          }
          if (rope) rope->rotate(scratch.data(), scratch.data(), width);
          encode_row(key, scratch.data(), to);
        }
      }
    }
  }

  // What attend() reads (docs/semantics.md, "KV cache"): the rows in storage, their dtypes, the
  // ring, the pages, what each sequence holds and the keys' RoPE.
  detail::KeySource key_source() const {
    detail::KeySource s;
    s.B = cfg.batch; s.H = cfg.kv_heads; s.D = D(); s.Dv = Dv();
    s.Lk = *std::max_element(lengths.begin(), lengths.end());
    s.k_type = ktype; s.v_type = vtype; s.keys_rotated = rotated;
    const int64_t ku = row_units(ktype, D()), vu = row_units(vtype, Dv());
    if (paged()) {
      s.k_pages = k_pages.data(); s.v_pages = v_pages.data();
      s.page_keys = P(); s.pages_per_seq = pages_per_seq;
      s.ks = {0, P() * ku, ku}; s.vs = {0, P() * vu, vu};
    } else {
      if (s.Lk > 0) { s.k = k.data(); s.v = v.data(); }
      s.ks = {s.H * cap() * ku, cap() * ku, ku}; s.vs = {s.H * cap() * vu, cap() * vu, vu};
    }
    s.lengths = lengths.data(); s.first = first.data();
    if (ring()) { s.sinks = sinks(); s.ring = cap() - sinks(); s.window = cfg.window; }
    if (rope) { s.rope = cfg.rope; s.rope_table = &*rope; }
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
    check_append(k_in, v_in, counts, take);
    own_new_positions(take);
    write(k_in, true, take);
    write(v_in, false, take);
    advance(take);
  }

  // Copies the rows of position `from` to position `to` (every head, K and V) within sequence b
  // (the page of `to` already owned). With RoPE (`rope` and a scratch row of D floats, made before
  // anything moves) the key rows are re-rotated by (to - from): stored at their new position's
  // angle (f16, q8 and q4 rows are rounded or quantized again).
  void move_row(int64_t b, int64_t from, int64_t to, detail::RopeRotation* rope, float* scratch) {
    if (rope) rope->at(to - from);
    for (int64_t h = 0; h < cfg.kv_heads; ++h) {
      if (rope) {
        read_row(true, b, h, from, scratch);
        rope->rotate(scratch, scratch, D());
        encode_row(true, scratch, row(true, b, h, to));
      } else {
        std::memmove(row(true, b, h, to), row(true, b, h, from), size_t(k_row_bytes));
      }
      std::memmove(row(false, b, h, to), row(false, b, h, from), size_t(v_row_bytes));
    }
  }
};

KVCache::KVCache(const KVCacheConfig& config) : impl_(new Impl) {
  KVCacheConfig c = config;
  if (c.batch < 1) fail("batch", cat("must be >= 1, given ", c.batch));
  if (c.kv_heads < 1) fail("kv_heads", cat("must be >= 1, given ", c.kv_heads));
  if (c.capacity < 1) fail("capacity", cat("must be >= 1, given ", c.capacity));
  if (c.capacity > detail::kMaxSequenceLength)
    fail("capacity", cat("must be <= ", detail::kMaxSequenceLength, ", given ", c.capacity));
  if (c.head_dim < 1) fail("head_dim", cat("must be >= 1, given ", c.head_dim));
  if (c.value_dim == -1) c.value_dim = c.head_dim;
  if (c.value_dim < 1) fail("value_dim", cat("must be >= 1 (or -1 for head_dim), given ", c.value_dim));
  if (!valid_type(c.dtype)) fail_type("dtype", cat("must be f32, f16, q8 or q4, given ", int(c.dtype)));
  if (c.key_dtype && !valid_type(*c.key_dtype))
    fail_type("key_dtype", cat("must be f32, f16, q8 or q4, given ", int(*c.key_dtype)));
  if (c.value_dtype && !valid_type(*c.value_dtype))
    fail_type("value_dtype", cat("must be f32, f16, q8 or q4, given ", int(*c.value_dtype)));
  const KVType kt = c.key_dtype.value_or(c.dtype), vt = c.value_dtype.value_or(c.dtype);
  c.key_dtype = kt;
  c.value_dtype = vt;
  if (c.key_rotation != KeyRotation::automatic && c.key_rotation != KeyRotation::none &&
      c.key_rotation != KeyRotation::hadamard)
    fail_type("key_rotation", cat("must be automatic, none or hadamard, given ", int(c.key_rotation)));
  const bool rotated = c.key_rotation == KeyRotation::hadamard || (c.key_rotation == KeyRotation::automatic &&
                                                                   kt == KVType::q4 && c.head_dim % 2 == 0);
  if (rotated && !detail::is_quantized(kt))
    fail("key_rotation", cat("hadamard rotates keys before quantizing them: it needs key dtype q8 or q4, given ",
                             kv_type_name(kt)));
  if (rotated && c.head_dim % 2 != 0)
    fail("key_rotation", cat("hadamard needs an even head_dim, given ", c.head_dim));
  if (c.window < 0) fail("window", cat("must be >= 0 (0 = no window), given ", c.window));
  if (c.sink_tokens < 0) fail("sink_tokens", cat("must be >= 0, given ", c.sink_tokens));
  if (c.sink_tokens > 0 && c.window == 0)
    fail("sink_tokens", cat("keeps the first positions beside a sliding window: it needs a window (a cache "
                            "without one keeps every position), given ", c.sink_tokens, " with window 0"));
  if (c.window > 0 && c.capacity < c.window + c.sink_tokens)
    fail("capacity", cat("must be >= window + sink tokens = ", c.window + c.sink_tokens,
                         " for a sliding-window cache, given ", c.capacity));
  if (c.rope) c.rope = detail::check_rope(*c.rope, c.head_dim, "rope");  // dims resolved
  if (c.page_size < 0 || c.page_size > detail::kMaxSequenceLength)
    fail("page_size", cat("must be in [0, ", detail::kMaxSequenceLength, "] (0 = not paged), given ", c.page_size));
  const int64_t kb = detail::stored_row_bytes(kt, c.head_dim), vb = detail::stored_row_bytes(vt, c.value_dim);
  Impl& m = *impl_;
  if (c.page_size > 0) {
    const int64_t pk = detail::checked_elements({c.kv_heads, c.page_size, kb}, 1, "page_size");
    const int64_t pv = detail::checked_elements({c.kv_heads, c.page_size, vb}, 1, "page_size");
    m.k_page_bytes = (pk + 63) / 64 * 64;  // V rows start on a cache line
    m.page_bytes = detail::checked_elements({m.k_page_bytes + pv}, 1, "page_size");
    m.pages_per_seq = (c.capacity + c.page_size - 1) / c.page_size;
    detail::checked_elements({c.batch, m.pages_per_seq}, 2 * sizeof(void*) + 4, "capacity");
    m.table.assign(size_t(c.batch * m.pages_per_seq), -1);
    m.k_pages.assign(m.table.size(), nullptr);
    m.v_pages.assign(m.table.size(), nullptr);
  } else {
    const int64_t k_bytes = detail::checked_elements({c.batch, c.kv_heads, c.capacity, kb}, 1, "capacity");
    const int64_t v_bytes = detail::checked_elements({c.batch, c.kv_heads, c.capacity, vb}, 1, "capacity");
    detail::checked_elements({k_bytes + v_bytes}, 1, "capacity");
    m.k.assign(size_t(k_bytes), 0);
    m.v.assign(size_t(v_bytes), 0);
  }
  m.cfg = c;
  m.ktype = kt;
  m.vtype = vt;
  m.rotated = rotated;
  if (c.rope) m.rope.emplace(*c.rope);
  m.k_row_bytes = kb;
  m.v_row_bytes = vb;
  m.lengths.assign(size_t(c.batch), 0);
  m.first.assign(size_t(c.batch), 0);
}

KVCache::KVCache(KVCache&&) noexcept = default;
KVCache& KVCache::operator=(KVCache&&) noexcept = default;
KVCache::~KVCache() = default;

// A moved-from cache holds nothing: the accessors answer "empty" (they are noexcept), every other
// call is an ArgumentError naming the cache, never a null dereference.
namespace {
const KVCacheConfig kMovedFromConfig = [] {
  KVCacheConfig c;
  c.batch = c.kv_heads = c.capacity = c.head_dim = c.value_dim = 0;
  return c;
}();
const std::vector<int32_t> kNoLengths;
}  // namespace

KVCache::Impl& KVCache::live() const {
  if (!impl_) fail("cache", "used after it was moved from (a moved-from KVCache holds no storage)");
  return *impl_;
}

const KVCacheConfig& KVCache::config() const noexcept { return impl_ ? impl_->cfg : kMovedFromConfig; }
const std::vector<int32_t>& KVCache::lengths() const noexcept { return impl_ ? impl_->lengths : kNoLengths; }
bool KVCache::keys_rotated() const noexcept { return impl_ && impl_->rotated; }
int64_t KVCache::byte_length() const noexcept {
  if (!impl_) return 0;
  if (impl_->paged()) return int64_t(impl_->pool.size()) * impl_->page_bytes;
  return int64_t(impl_->k.size() + impl_->v.size());
}
const void* KVCache::key_data() const noexcept { return impl_ && !impl_->paged() ? impl_->k.data() : nullptr; }
const void* KVCache::value_data() const noexcept { return impl_ && !impl_->paged() ? impl_->v.data() : nullptr; }

void KVCache::append(const ConstTensor& k, const ConstTensor& v, Span<int32_t> counts) {
  live().append(k, v, counts);
}

void KVCache::append(const HalfTensor& k, const HalfTensor& v, Span<int32_t> counts) {
  Impl& m = live();
  if (m.ktype != KVType::f16 || m.vtype != KVType::f16)
    fail_type("k", cat("raw float16 halves (uint16) need a cache whose keys and values are f16; this cache is ",
                       kv_type_name(m.ktype), "/", kv_type_name(m.vtype), ": pass floats"));
  m.append(k, v, counts);
}

KVCache::Contents KVCache::read(int64_t b) const {
  const Impl& m = live();
  if (b < 0 || b >= m.cfg.batch) fail("b", cat("must be in [0, batch = ", m.cfg.batch, "), given ", b));
  Contents out;
  out.sinks = m.lead(b);
  out.start = m.first[size_t(b)];
  out.length = m.lengths[size_t(b)] - out.start;
  const int64_t H = m.cfg.kv_heads, n = out.sinks + out.length;
  out.key.assign(size_t(H * n * m.D()), 0.0f);
  out.value.assign(size_t(H * n * m.Dv()), 0.0f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = i < out.sinks ? i : out.start + i - out.sinks;
      m.read_row(true, b, h, pos, out.key.data() + (h * n + i) * m.D());
      m.read_row(false, b, h, pos, out.value.data() + (h * n + i) * m.Dv());
    }
  return out;
}

void KVCache::truncate(Span<int32_t> lengths) {
  Impl& m = live();
  if (lengths.data == nullptr || int64_t(lengths.size) != m.cfg.batch)
    fail("lengths", cat("length must be the batch size ", m.cfg.batch, ", given ", lengths.size));
  for (int64_t b = 0; b < m.cfg.batch; ++b)
    if (lengths[size_t(b)] < 0 || lengths[size_t(b)] > m.lengths[size_t(b)])
      fail(cat("lengths[", b, "]"), cat("must be in [0, current length ", m.lengths[size_t(b)], "], given ",
                                        lengths[size_t(b)]));
  for (int64_t b = 0; b < m.cfg.batch; ++b) {
    m.lengths[size_t(b)] = lengths[size_t(b)];
    m.first[size_t(b)] = std::min(m.first[size_t(b)], lengths[size_t(b)]);
    m.release_after(b, lengths[size_t(b)]);
  }
}

void KVCache::reset() noexcept {
  if (!impl_) return;
  std::fill(impl_->lengths.begin(), impl_->lengths.end(), 0);
  std::fill(impl_->first.begin(), impl_->first.end(), 0);
  for (int64_t b = 0; b < impl_->cfg.batch; ++b) impl_->release_after(b, 0);
}

void KVCache::fork(int64_t src, int64_t dst) {
  Impl& m = live();
  const int64_t B = m.cfg.batch;
  if (src < 0 || src >= B) fail("src", cat("must be a sequence in [0, batch = ", B, "), given ", src));
  if (dst < 0 || dst >= B) fail("dst", cat("must be a sequence in [0, batch = ", B, "), given ", dst));
  if (dst == src) fail("dst", cat("must differ from src (both are ", src, ")"));
  if (m.lengths[size_t(dst)] != 0)
    fail("dst", cat("sequence ", dst, " holds ", m.lengths[size_t(dst)],
                    " positions: fork needs an empty sequence (truncate or reset it first), nothing was changed"));
  if (m.paged()) {
    m.release_after(dst, 0);
    for (int64_t i = 0; i < m.pages_per_seq; ++i) {
      const int64_t from = src * m.pages_per_seq + i, to = dst * m.pages_per_seq + i;
      m.table[size_t(to)] = m.table[size_t(from)];
      if (m.table[size_t(to)] >= 0) ++m.refs[size_t(m.table[size_t(to)])];
      m.point(to);
    }
  } else {  // one block: copy the slots src uses
    const int64_t used = m.ring() ? std::min<int64_t>(m.lengths[size_t(src)], m.cap()) : m.lengths[size_t(src)];
    for (int64_t h = 0; h < m.cfg.kv_heads; ++h) {
      const int64_t kfrom = (src * m.cfg.kv_heads + h) * m.cap(), kto = (dst * m.cfg.kv_heads + h) * m.cap();
      std::memcpy(m.k.data() + kto * m.k_row_bytes, m.k.data() + kfrom * m.k_row_bytes, size_t(used * m.k_row_bytes));
      std::memcpy(m.v.data() + kto * m.v_row_bytes, m.v.data() + kfrom * m.v_row_bytes, size_t(used * m.v_row_bytes));
    }
  }
  m.lengths[size_t(dst)] = m.lengths[size_t(src)];
  m.first[size_t(dst)] = m.first[size_t(src)];
}

std::vector<int32_t> KVCache::pages(int64_t b) const {
  const Impl& m = live();
  if (b < 0 || b >= m.cfg.batch) fail("b", cat("must be in [0, batch = ", m.cfg.batch, "), given ", b));
  if (!m.paged()) return {};
  return std::vector<int32_t>(m.table.begin() + b * m.pages_per_seq, m.table.begin() + (b + 1) * m.pages_per_seq);
}

void KVCache::keep(int64_t b, Span<int32_t> tree, Span<int32_t> path) {
  const int64_t sequence = b;
  Impl& m = live();
  const int64_t B = m.cfg.batch;
  if (sequence < 0 || sequence >= B) fail("b", cat("must be in [0, batch = ", B, "), given ", sequence));
  if (tree.data == nullptr && tree.size > 0) fail("tree", cat("data is null but size is ", tree.size));
  if (path.data == nullptr && path.size > 0) fail("path", cat("data is null but size is ", path.size));
  const int64_t T = int64_t(tree.size), len = m.lengths[size_t(sequence)];
  if (T < 1) fail("tree", "needs at least one node (the parent indices given to attend)");
  if (T > len - m.first[size_t(sequence)])
    fail("tree", cat("its ", T, " nodes must be the newest positions of sequence ", sequence, ", which holds ",
                     len - m.first[size_t(sequence)], " (positions ", m.first[size_t(sequence)], " to ", len - 1, ")"));
  for (int64_t i = 0; i < T; ++i)
    if (tree[size_t(i)] < -1 || tree[size_t(i)] >= i)
      fail(cat("tree[", i, "]"), cat("node ", i, "'s parent must be -1 (a root) or an earlier node in [0, ", i,
                                     "), given ", tree[size_t(i)]));
  for (size_t k = 0; k < path.size; ++k) {
    const int32_t node = path[k];
    if (node < 0 || node >= T) fail(cat("path[", k, "]"), cat("must be a node in [0, ", T, "), given ", node));
    const int32_t want = k == 0 ? -1 : path[k - 1];
    if (tree[size_t(node)] != want)
      fail(cat("path[", k, "]"),
           k == 0 ? cat("the path must start at a root (parent -1); node ", node, "'s parent is ", tree[size_t(node)])
                  : cat("node ", node, " is not a child of path[", k - 1, "] = ", want, " (its parent is ",
                        tree[size_t(node)], ")"));
  }
  // Nodes only move down (path[k] >= k: parents come first), so copying in path order never
  // overwrites a node still to be moved.
  const int64_t base = len - T;
  m.own_positions(sequence, base, base + int64_t(path.size));
  std::optional<detail::RopeRotation> rope;
  std::vector<float> scratch;
  if (m.rope) {
    rope.emplace(*m.rope);
    scratch.resize(size_t(m.D()));
  }
  for (size_t k = 0; k < path.size; ++k)
    if (path[k] != int32_t(k))
      m.move_row(sequence, base + path[k], base + int64_t(k), rope ? &*rope : nullptr, scratch.data());
  m.lengths[size_t(sequence)] = int32_t(base + int64_t(path.size));
  m.release_after(sequence, m.lengths[size_t(sequence)]);
}

Options KVCache::default_options() {
  Options o;
  o.causal = true;
  return o;
}

void KVCache::attend(const ConstTensor& q, const MutableTensor& out) const {
  attend(q, out, default_options());
}

void KVCache::attend(const ConstTensor& q, const MutableTensor& out, const Options& options,
                     const ExtraOutputs& extra) const {
  detail::execute(detail::make_problem(q, live().key_source(), &out, options, extra), options.target);
}

}  // namespace maskattn
