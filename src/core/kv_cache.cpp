// KVCache: storage, appends in place, and attention over what the cache holds. Every public call
// validates everything before it writes anything (an append past capacity changes nothing).
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/errors.hpp"
#include "kernel/half.hpp"
#include "kernel/quant.hpp"
#include "core/problem.hpp"
#include "dispatch/targets.hpp"
#include "mask/row_keys.hpp"
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
    case KVType::f32: return "f32";
    case KVType::f16: return "f16";
    case KVType::q8: return "q8";
    case KVType::q4: return "q4";
  }
  return "?";
}

namespace {
using detail::cat;
using detail::fail;
using detail::fail_type;

bool valid_type(KVType t) { return t == KVType::f32 || t == KVType::f16 || t == KVType::q8 || t == KVType::q4; }
// Units of a stored row that a stride counts: floats, halves, or bytes (quantized rows).
int64_t row_units(KVType t, int64_t n) {
  return detail::is_quantized(t) ? detail::stored_row_bytes(t, n) : n;
}

[[noreturn]] void fail_type_or_range(const ArgumentError& e, const std::string& message) {
  throw ArgumentError("q", message, e.is_type_error());
}
}  // namespace

struct KVCache::Impl {
  KVCacheConfig cfg;                // dtypes resolved
  KVType ktype = KVType::f32, vtype = KVType::f32;
  bool rotated = false;             // keys stored as R·k (kernel/quant.hpp)
  int64_t k_row_bytes = 0, v_row_bytes = 0;
  // [B, Hkv, capacity] rows of K and of V, in their dtype's format (kernel/quant.hpp). uint8_t storage
  // from operator new is aligned for floats and halves.
  std::vector<uint8_t> k, v;
  std::vector<int32_t> lengths;     // tokens seen per sequence (absolute positions)
  std::vector<int32_t> first;       // lowest position still held (a ring overwrites older ones)

  int64_t D() const { return cfg.head_dim; }
  int64_t Dv() const { return cfg.value_dim; }
  int64_t cap() const { return cfg.capacity; }
  bool ring() const { return cfg.window > 0; }
  int64_t slot(int64_t pos) const { return ring() ? pos % cap() : pos; }
  // The stored row of position `pos` of (b, h) in K or V.
  uint8_t* row(std::vector<uint8_t>& store, int64_t row_bytes, int64_t b, int64_t h, int64_t pos) {
    return store.data() + ((b * cfg.kv_heads + h) * cap() + slot(pos)) * row_bytes;
  }
  const uint8_t* row(const std::vector<uint8_t>& store, int64_t row_bytes, int64_t b, int64_t h, int64_t pos) const {
    return store.data() + ((b * cfg.kv_heads + h) * cap() + slot(pos)) * row_bytes;
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
  template <class In>
  void write(const TensorView<const In>& src, std::vector<uint8_t>& store, KVType t, int64_t width,
             int64_t row_bytes, bool rotate_rows, const std::vector<int32_t>& take) {
    std::vector<float> scratch(static_cast<size_t>(width));
    for (int64_t b = 0; b < cfg.batch; ++b) {
      const int64_t n = take[size_t(b)];
      // A ring keeps only its newest `capacity` positions: older new ones would be overwritten.
      const int64_t t0 = ring() ? std::max<int64_t>(0, n - cap()) : 0;
      for (int64_t h = 0; h < cfg.kv_heads; ++h)
        for (int64_t i = t0; i < n; ++i) {
          const In* from = src.data + b * src.strides[0] + h * src.strides[1] + i * src.strides[2];
          uint8_t* to = row(store, row_bytes, b, h, lengths[size_t(b)] + i);
          if constexpr (std::is_same_v<In, uint16_t>) {  // halves into a float16 cache
            std::memcpy(to, from, size_t(width) * 2);
          } else if (t == KVType::f32) {
            std::memcpy(to, from, size_t(width) * 4);
          } else if (t == KVType::f16) {
            auto* h16 = reinterpret_cast<uint16_t*>(to);
            for (int64_t c = 0; c < width; ++c) h16[c] = float_to_half(from[c]);
          } else {
            std::memcpy(scratch.data(), from, size_t(width) * 4);
            if (rotate_rows) detail::rotate(scratch.data(), width);
            detail::quantize_row(t, scratch.data(), width, to);
          }
        }
    }
  }

  // Row j of sequence b, head h as floats (dequantized, unrotated).
  void read_row(bool key, int64_t b, int64_t h, int64_t j, float* out) const {
    if (key) detail::row_to_float(ktype, row(k, k_row_bytes, b, h, j), D(), rotated, out);
    else detail::row_to_float(vtype, row(v, v_row_bytes, b, h, j), Dv(), false, out);
  }

  void advance(const std::vector<int32_t>& take) {
    for (int64_t b = 0; b < cfg.batch; ++b) {
      lengths[size_t(b)] += take[size_t(b)];
      if (ring()) first[size_t(b)] = int32_t(std::max<int64_t>(first[size_t(b)], lengths[size_t(b)] - cap()));
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
  if (c.window > 0 && c.capacity < c.window)
    fail("capacity", cat("must be >= window = ", c.window, " for a sliding-window cache, given ", c.capacity));
  const int64_t kb = detail::stored_row_bytes(kt, c.head_dim), vb = detail::stored_row_bytes(vt, c.value_dim);
  const int64_t k_bytes = detail::checked_elements({c.batch, c.kv_heads, c.capacity, kb}, 1, "capacity");
  const int64_t v_bytes = detail::checked_elements({c.batch, c.kv_heads, c.capacity, vb}, 1, "capacity");
  detail::checked_elements({k_bytes + v_bytes}, 1, "capacity");
  Impl& m = *impl_;
  m.cfg = c;
  m.ktype = kt;
  m.vtype = vt;
  m.rotated = rotated;
  m.k_row_bytes = kb;
  m.v_row_bytes = vb;
  m.k.assign(size_t(k_bytes), 0);
  m.v.assign(size_t(v_bytes), 0);
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
  return int64_t(impl_->k.size() + impl_->v.size());
}
const void* KVCache::key_data() const noexcept { return impl_ ? impl_->k.data() : nullptr; }
const void* KVCache::value_data() const noexcept { return impl_ ? impl_->v.data() : nullptr; }

void KVCache::append(const ConstTensor& k, const ConstTensor& v, Span<int32_t> counts) {
  Impl& m = live();
  std::vector<int32_t> take;
  m.check_append(k, v, counts, take);
  m.write(k, m.k, m.ktype, m.D(), m.k_row_bytes, m.rotated, take);
  m.write(v, m.v, m.vtype, m.Dv(), m.v_row_bytes, false, take);
  m.advance(take);
}

void KVCache::append(const HalfTensor& k, const HalfTensor& v, Span<int32_t> counts) {
  Impl& m = live();
  if (m.ktype != KVType::f16 || m.vtype != KVType::f16)
    fail_type("k", cat("raw float16 halves (uint16) need a cache whose keys and values are f16; this cache is ",
                       kv_type_name(m.ktype), "/", kv_type_name(m.vtype), ": pass floats"));
  std::vector<int32_t> take;
  m.check_append(k, v, counts, take);
  m.write(k, m.k, m.ktype, m.D(), m.k_row_bytes, false, take);
  m.write(v, m.v, m.vtype, m.Dv(), m.v_row_bytes, false, take);
  m.advance(take);
}

KVCache::Contents KVCache::read(int64_t b) const {
  const Impl& m = live();
  if (b < 0 || b >= m.cfg.batch) fail("b", cat("must be in [0, batch = ", m.cfg.batch, "), given ", b));
  Contents out;
  out.start = m.first[size_t(b)];
  out.length = m.lengths[size_t(b)] - out.start;
  const int64_t H = m.cfg.kv_heads, n = out.length;
  out.key.assign(size_t(H * n * m.D()), 0.0f);
  out.value.assign(size_t(H * n * m.Dv()), 0.0f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) {
      m.read_row(true, b, h, out.start + i, out.key.data() + (h * n + i) * m.D());
      m.read_row(false, b, h, out.start + i, out.value.data() + (h * n + i) * m.Dv());
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
  }
}

void KVCache::reset() noexcept {
  if (!impl_) return;
  std::fill(impl_->lengths.begin(), impl_->lengths.end(), 0);
  std::fill(impl_->first.begin(), impl_->first.end(), 0);
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
  const Impl& m = live();
  if (!options.key_lengths.empty())
    fail("key_lengths", "is implied by the cache (what each sequence holds) and must not be given");
  const int64_t B = m.cfg.batch, H = m.cfg.kv_heads, cap = m.cap();
  const int64_t Lk = *std::max_element(m.lengths.begin(), m.lengths.end());
  Options o = options;
  o.key_lengths = Span<int32_t>(m.lengths);
  if (m.ring()) {  // the ring's rule: d(i) - W + 1 <= j <= d(i), on top of the caller's window
    const int64_t left = m.cfg.window - 1;
    o.window.left = o.window.left < 0 ? left : std::min(o.window.left, left);
    o.window.right = 0;
  }
  // Views of the storage as [B, Hkv, Lk, D] for validation (with a ring, key j lives in slot
  // j % capacity: the kernels address it through Problem::key_ring). Rows of other dtypes are
  // described as float rows here; the kernels then read them through k_stored / v_stored with
  // strides in the dtype's own units.
  ConstTensor kv_view[2];
  for (int s = 0; s < 2; ++s) {
    const int64_t width = s == 0 ? m.D() : m.Dv();
    ConstTensor& t = kv_view[s];
    t.data = reinterpret_cast<const float*>(s == 0 ? m.k.data() : m.v.data());
    t.shape[0] = B; t.shape[1] = H; t.shape[2] = Lk; t.shape[3] = width;
    t.strides[0] = H * cap * width; t.strides[1] = cap * width; t.strides[2] = width; t.strides[3] = 1;
    if (Lk == 0) t.data = nullptr;
  }
  detail::Problem p;
  try {
    p = detail::make_problem(q, kv_view[0], kv_view[1], &out, o, extra);
  } catch (const ArgumentError& e) {
    // K and V are the cache's own: a mismatch with them is the query's (batch, heads, D).
    if (e.argument() != "k" && e.argument() != "v") throw;
    fail_type_or_range(e, cat("does not match the cache (batch ", B, ", kv_heads ", H, ", head_dim ", m.D(),
                              "): ", e.what()));
  }
  p.k_type = m.ktype;
  p.v_type = m.vtype;
  p.keys_rotated = m.rotated;
  if (m.ktype != KVType::f32) {
    const int64_t u = row_units(m.ktype, m.D());
    p.k_stored = Lk ? m.k.data() : nullptr;
    p.k = nullptr;
    p.ks = {H * cap * u, cap * u, u};
  }
  if (m.vtype != KVType::f32) {
    const int64_t u = row_units(m.vtype, m.Dv());
    p.v_stored = Lk ? m.v.data() : nullptr;
    p.v = nullptr;
    p.vs = {H * cap * u, cap * u, u};
  }
  p.key_ring = m.ring() ? cap : 0;
  p.uniform_over_key_lengths = true;
  p.key_first = m.first.data();
  if (m.ring()) {  // a query whose window reaches an overwritten position cannot be answered
    for (int64_t b = 0; b < B; ++b) {
      if (m.first[size_t(b)] == 0) continue;
      for (int64_t i = 0; i < p.Lq; ++i) {
        const detail::RowKeys r = detail::row_keys(p, b, i);
        if (r.empty() || r.first() >= m.first[size_t(b)]) continue;
        fail("q", cat("query ", i, " of sequence ", b, " (position ", m.lengths[size_t(b)] - p.Lq + i,
                      ") attends position ", r.first(), ", which the ring has overwritten (it holds positions ",
                      m.first[size_t(b)], " to ", m.lengths[size_t(b)] - 1,
                      "); a capacity >= window + Lq - 1 = ", m.cfg.window + p.Lq - 1, " avoids this"));
      }
    }
  }
  const Target t = options.target == Target::automatic ? best_target() : options.target;
  if (t != Target::reference) return detail::run_kernel(t, p);

  // The reference reads plain float K/V: the logical contents (dequantized, unrotated), in order.
  std::vector<float> logical[2];
  for (int s = 0; s < 2; ++s) {
    const int64_t width = s == 0 ? m.D() : m.Dv();
    logical[s].assign(size_t(B * H * Lk * width), 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = m.first[size_t(b)]; j < m.lengths[size_t(b)]; ++j)
          m.read_row(s == 0, b, h, j, logical[s].data() + ((b * H + h) * Lk + j) * width);
  }
  p.k = logical[0].data();
  p.v = logical[1].data();
  p.k_type = p.v_type = KVType::f32;
  p.k_stored = p.v_stored = nullptr;
  p.keys_rotated = false;
  p.key_ring = 0;
  p.ks = {H * Lk * m.D(), Lk * m.D(), m.D()};
  p.vs = {H * Lk * m.Dv(), Lk * m.Dv(), m.Dv()};
  detail::run_reference(p);
}

}  // namespace maskattn
