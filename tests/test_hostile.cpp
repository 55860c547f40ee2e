// Hostile input, C++ side: one table of mistakes a caller (or a binding) can make, each row a single
// bad call against a world of valid inputs, outputs and KV caches. For every row:
//   - the call throws maskattn::ArgumentError (no other exception, no crash, no hang), of the
//     expected kind (is_type_error() for a wrong kind of value, as JS maps it to TypeError);
//   - argument() names the culprit, and what() says the values that matter;
//   - nothing was written: every buffer of the world (inputs, outputs, masks, spans), including
//     64 guard elements before and after each, is byte-for-byte what it was, and every cache holds
//     the same lengths and the same K/V bytes.
// Guard zones make "the heap was not written" checkable without a sanitizer (and under Node, in
// WebAssembly, where there is none); the AddressSanitizer build checks reads as well.
// Rows cover docs/semantics.md "Bad input" item by item, shapes with negative, >= 2^31 and
// overflowing dimensions, strides and sizes, the float precision of softcap, overflow-prone
// scratch arithmetic on empty tensors, and every KV-cache misuse (past capacity, wrong dtype,
// truncate beyond length, use of a moved-from cache, bad configurations).
//
// Portable (no threads, no files): runs natively and under Node on WebAssembly.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "maskattn/reference.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::ConstTensor;
using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::Kernel;
using maskattn::KVType;
using maskattn::MutableTensor;
using maskattn::Span;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t p2(int e) { return int64_t(1) << e; }

// A buffer with kGuard elements of a sentinel on each side; p() is its first real element.
template <class T>
struct Buf {
  static constexpr size_t kGuard = 64;
  std::vector<T> all;
  explicit Buf(size_t n, T fill = T(), T guard = T(0x5a)) : all(n + 2 * kGuard, guard) {
    std::fill(all.begin() + kGuard, all.end() - kGuard, fill);
  }
  T* p() { return all.data() + kGuard; }
  size_t size() const { return all.size() - 2 * kGuard; }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> b(all.size() * sizeof(T));
    std::memcpy(b.data(), all.data(), b.size());
    return b;
  }
};

// A cache's observable state: lengths and every byte of K/V storage.
std::vector<unsigned char> cache_state(const KVCache& c) {
  std::vector<unsigned char> s;
  for (int32_t l : c.lengths()) s.insert(s.end(), reinterpret_cast<const unsigned char*>(&l),
                                         reinterpret_cast<const unsigned char*>(&l) + 4);
  const KVCacheConfig& cfg = c.config();
  const int64_t eb = cfg.dtype == KVType::float16 ? 2 : 4;
  const int64_t kb = cfg.batch * cfg.kv_heads * cfg.capacity * cfg.head_dim * eb;
  const int64_t vb = cfg.batch * cfg.kv_heads * cfg.capacity * cfg.value_dim * eb;
  const auto* k = static_cast<const unsigned char*>(c.key_data());
  const auto* v = static_cast<const unsigned char*>(c.value_data());
  if (k) s.insert(s.end(), k, k + kb);
  if (v) s.insert(s.end(), v, v + vb);
  return s;
}

// The observable state of a cache whose storage is not one block of floats (q8/q4, pages):
// lengths, byte length, every sequence's contents as read() gives them and its page table.
std::vector<unsigned char> contents_state(const KVCache& c) {
  std::vector<unsigned char> s;
  auto add = [&s](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    s.insert(s.end(), b, b + n);
  };
  const int64_t bytes = c.byte_length();
  add(&bytes, sizeof bytes);
  for (int64_t b = 0; b < c.config().batch; ++b) {
    const KVCache::Contents r = c.read(b);
    const int64_t head[3] = {r.start, r.length, r.sinks};
    add(head, sizeof head);
    add(r.key.data(), r.key.size() * 4);
    add(r.value.data(), r.value.size() * 4);
    const std::vector<int32_t> pages = c.pages(b);
    add(pages.data(), pages.size() * 4);
  }
  return s;
}

KVCacheConfig cache_config(KVType dtype, int64_t capacity, int64_t window = 0) {
  KVCacheConfig c;
  c.batch = 2;
  c.kv_heads = 2;
  c.capacity = capacity;
  c.head_dim = 4;
  c.value_dim = 6;
  c.dtype = dtype;
  c.window = window;
  return c;
}

// Every valid input, output and cache a row may misuse.
struct World {
  // The attention problem: q [2, 4, 3, 4], k [2, 2, 5, 4], v [2, 2, 5, 6], out [2, 4, 3, 6].
  int64_t B = 2, Hq = 4, Hkv = 2, Lq = 3, Lk = 5, D = 4, Dv = 6;
  Buf<float> q{96, 0.25f}, k{80, -0.5f}, v{120, 1.0f}, out{144, 777.0f}, weights{120, 777.0f}, lse{24, 777.0f};
  Buf<uint8_t> allowed{10, 1};  // [2, 1, 1, 5]
  Buf<float> bias{15, 0.0f};    // [3, 5]
  Buf<int32_t> key_lengths{2, 5}, query_lengths{2, 3}, query_segments{6, 0}, key_segments{10, 0};
  Buf<float> slopes{4, 0.5f};
  ConstTensor qv, kv, vv;
  MutableTensor ov;
  maskattn::Options opt;
  maskattn::ExtraOutputs extra;
  maskattn::Stats stats;

  // Caches: float32 (capacity 6, holding 3 and 5), float16 (same), a ring (window 3, capacity 3,
  // holding 5: positions 0 and 1 overwritten). Inputs for one append of T = 2 and one decode step.
  KVCache f32{cache_config(KVType::float32, 6)}, f16{cache_config(KVType::float16, 6)}, ring{cache_config(KVType::float32, 3, 3)};
  // The newer surfaces: a q8 cache (holding 3 and 5), and a paged cache with 4-bit keys and 8-bit
  // values, pages of 2, whose sequence 1 is a fork of sequence 0 (5 positions, pages shared).
  KVCache q8{cache_config(KVType::q8, 6)}, paged{paged_config()};
  Buf<float> ak{32, 0.125f}, av{48, -0.25f};  // k [2, 2, 2, 4], v [2, 2, 2, 6]
  Buf<uint16_t> hk{32, 0x3c00}, hv{48, 0x3c00};
  Buf<int32_t> counts{2, 1}, lengths{2, 1};
  Buf<float> cq{32, 0.5f}, cout{48, 777.0f}, cw{40, 777.0f};  // q [2, 4, 1, 4], out [2, 4, 1, 6], weights [2,4,1,5]

  World() {
    qv = maskattn::bhld<const float>(q.p(), B, Hq, Lq, D, int64_t(q.size()));
    kv = maskattn::bhld<const float>(k.p(), B, Hkv, Lk, D, int64_t(k.size()));
    vv = maskattn::bhld<const float>(v.p(), B, Hkv, Lk, Dv, int64_t(v.size()));
    ov = maskattn::bhld(out.p(), B, Hq, Lq, Dv, int64_t(out.size()));
    opt.causal = true;
    opt.stats = &stats;
    extra.weights = weights.p();
    extra.weights_size = int64_t(weights.size());
    extra.lse = lse.p();
    extra.lse_size = int64_t(lse.size());
    // Caches: 3 positions for sequence 0, 5 for sequence 1 (the ring: 5 for both).
    std::vector<float> k5(2 * 2 * 5 * 4, 0.75f), v5(2 * 2 * 5 * 6, -0.75f);
    const std::vector<int32_t> n35 = {3, 5};
    for (KVCache* c : {&f32, &f16})
      c->append(maskattn::bhld<const float>(k5.data(), 2, 2, 5, 4), maskattn::bhld<const float>(v5.data(), 2, 2, 5, 6), n35);
    ring.append(maskattn::bhld<const float>(k5.data(), 2, 2, 5, 4), maskattn::bhld<const float>(v5.data(), 2, 2, 5, 6));
    for (size_t i = 0; i < k5.size(); ++i) k5[i] = std::sin(float(i));
    for (size_t i = 0; i < v5.size(); ++i) v5[i] = std::cos(float(i));
    q8.append(maskattn::bhld<const float>(k5.data(), 2, 2, 5, 4), maskattn::bhld<const float>(v5.data(), 2, 2, 5, 6), n35);
    const std::vector<int32_t> n50 = {5, 0};
    paged.append(maskattn::bhld<const float>(k5.data(), 2, 2, 5, 4), maskattn::bhld<const float>(v5.data(), 2, 2, 5, 6), n50);
    paged.fork(0, 1);
  }
  static KVCacheConfig paged_config() {
    KVCacheConfig c = cache_config(KVType::q4, 8);
    c.value_dtype = KVType::q8;
    c.page_size = 2;
    return c;
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  void call() { maskattn::attention(qv, kv, vv, ov, opt, extra); }
  ConstTensor append_k() { return maskattn::bhld<const float>(ak.p(), 2, 2, 2, 4, int64_t(ak.size())); }
  ConstTensor append_v() { return maskattn::bhld<const float>(av.p(), 2, 2, 2, 6, int64_t(av.size())); }
  ConstTensor attend_q() { return maskattn::bhld<const float>(cq.p(), 2, 4, 1, 4, int64_t(cq.size())); }
  MutableTensor attend_out() { return maskattn::bhld(cout.p(), 2, 4, 1, 6, int64_t(cout.size())); }

  // Everything a failed call must leave as it was.
  std::vector<std::vector<unsigned char>> state() const {
    return {q.bytes(), k.bytes(), v.bytes(), out.bytes(), weights.bytes(), lse.bytes(), allowed.bytes(),
            bias.bytes(), key_lengths.bytes(), query_lengths.bytes(), query_segments.bytes(),
            key_segments.bytes(), slopes.bytes(), ak.bytes(), av.bytes(), hk.bytes(), hv.bytes(),
            counts.bytes(), lengths.bytes(), cq.bytes(), cout.bytes(), cw.bytes(),
            cache_state(f32), cache_state(f16), cache_state(ring), contents_state(q8), contents_state(paged)};
  }
};

const char* const kStateNames[] = {"q", "k", "v", "out", "weights", "lse", "allowed", "bias",
                                   "key_lengths", "query_lengths", "query_segments", "key_segments",
                                   "alibi_slopes", "append k", "append v", "append k halves",
                                   "append v halves", "counts", "truncate lengths", "attend q",
                                   "attend out", "attend weights", "float32 cache", "float16 cache",
                                   "ring cache", "q8 cache", "paged q4/q8 cache (forked)"};

template <class T>
void raw(maskattn::TensorView<T>& t, int64_t b, int64_t h, int64_t l, int64_t d) {
  t.shape[0] = b; t.shape[1] = h; t.shape[2] = l; t.shape[3] = d;
  t.strides[0] = t.strides[1] = t.strides[2] = 0;
  t.strides[3] = 1;
  t.size = -1;
}
// An empty problem (Lq = Lk = 0) whose head dims are d and dv: nothing to read or write.
void empty_dims(World& w, int64_t d, int64_t dv) {
  w.extra = maskattn::ExtraOutputs{};
  raw(w.qv, 1, 1, 0, d);
  raw(w.kv, 1, 1, 0, d);
  raw(w.vv, 1, 1, 0, dv);
  raw(w.ov, 1, 1, 0, dv);
}

// The world's problem seen as one query and one key of head dim 64 (q and k hold 96 and 80 floats),
// values and output of 6: a RoPE base's overflow depends on dims, and D = 4 never overflows.
void head_dim_64(World& w) {
  w.extra = maskattn::ExtraOutputs{};
  w.qv = maskattn::bhld<const float>(w.q.p(), 1, 1, 1, 64, int64_t(w.q.size()));
  w.kv = maskattn::bhld<const float>(w.k.p(), 1, 1, 1, 64, int64_t(w.k.size()));
  w.vv = maskattn::bhld<const float>(w.v.p(), 1, 1, 1, 6, int64_t(w.v.size()));
  w.ov = maskattn::bhld(w.out.p(), 1, 1, 1, 6, int64_t(w.out.size()));
}
maskattn::Rope rope(double theta, int64_t dims = 0, int layout = 0, int64_t offset = 0) {
  return maskattn::Rope{theta, dims, static_cast<maskattn::RopeLayout>(layout), offset};
}
maskattn::Rope scaled(maskattn::RopeScalingType type, double factor = 0) {
  maskattn::Rope r = rope(10000);
  r.scaling.type = type;
  r.scaling.factor = factor;
  return r;
}
void config_with_rope(const maskattn::Rope& r, int64_t head_dim = 4) {
  KVCacheConfig c = cache_config(KVType::float32, 4);
  c.head_dim = head_dim;
  c.rope = r;
  KVCache x(c);
}

enum Kind { range, type };

struct Row {
  const char* name;  // the mistake
  std::function<void(World&)> call;
  const char* arg;                // argument() must be this, or this[...] / this.<field>
  std::vector<std::string> says;  // what() must contain each
  Kind kind = range;
};
void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

bool names(const std::string& argument, const std::string& name) {
  if (argument == name) return true;
  return argument.size() > name.size() && argument.compare(0, name.size(), name) == 0 &&
         (argument[name.size()] == '[' || argument[name.size()] == '.');
}

using W = World;
const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // ---- docs/semantics.md "Bad input", item by item.
      {"shape_mismatch_k_batch", [](W& w) { w.kv.shape[0] = 3; w.kv.size = -1; w.call(); }, "k", {"3", "2"}},
      {"shape_mismatch_v_length", [](W& w) { w.vv.shape[2] = 4; w.call(); }, "v", {"4", "5"}},
      {"data_length_short", [](W& w) { w.qv.size = 95; w.call(); }, "q", {"96", "95"}},
      {"hq_not_multiple_of_hkv", [](W& w) { w.kv.shape[1] = w.vv.shape[1] = 3; w.kv.size = w.vv.size = -1; w.call(); }, "k", {"3", "4"}},
      {"key_length_above_lk", [](W& w) { static const std::vector<int32_t> l = {5, 6}; w.opt.key_lengths = l; w.call(); }, "key_lengths", {"6", "5"}},
      {"query_length_negative", [](W& w) { static const std::vector<int32_t> l = {-1, 3}; w.opt.query_lengths = l; w.call(); }, "query_lengths", {"-1"}},
      {"mask_cannot_broadcast", [](W& w) { w.opt.allowed = maskattn::make_mask<uint8_t>(w.allowed.p(), 2, 2, 1, 5); w.call(); }, "allowed", {"2", "4"}},
      {"window_below_minus_1", [](W& w) { w.opt.window.left = -2; w.call(); }, "window", {"-2"}},
      {"softcap_negative", [](W& w) { w.opt.softcap = -0.5f; w.call(); }, "softcap", {"-0.5"}},
      {"scale_nan", [](W& w) { w.opt.scale = kNaN; w.call(); }, "scale", {"nan"}},
      {"half_input_into_float32_cache", [](W& w) {
         w.f32.append(maskattn::HalfTensor(maskattn::bhld<const uint16_t>(w.hk.p(), 2, 2, 2, 4)),
                      maskattn::HalfTensor(maskattn::bhld<const uint16_t>(w.hv.p(), 2, 2, 2, 6)));
       }, "k", {"float16"}, type},
      {"byte_count_overflows_int64", [](W& w) { raw(w.qv, p2(31), p2(31), p2(31), 1); w.call(); }, "q", {"overflow"}},

      // ---- softcap in the precision the kernel uses (float).
      {"softcap_subnormal_1e-40", [](W& w) { w.opt.softcap = 1e-40f; w.call(); }, "softcap", {"normal"}},
      {"softcap_smallest_subnormal", [](W& w) { w.opt.softcap = std::numeric_limits<float>::denorm_min(); w.call(); }, "softcap", {"normal"}},
      {"softcap_scale_ratio_overflows_float", [](W& w) { w.opt.scale = 1e10f; w.opt.softcap = 1e-30f; w.call(); }, "softcap", {"overflows"}},
      {"softcap_inf", [](W& w) { w.opt.softcap = kInf; w.call(); }, "softcap", {"inf"}},
      {"softcap_nan", [](W& w) { w.opt.softcap = kNaN; w.call(); }, "softcap", {"nan"}},
      {"scale_inf", [](W& w) { w.opt.scale = -kInf; w.call(); }, "scale", {"inf"}},

      // ---- Shapes: negative, >= 2^31, products overflowing 32 and 64 bits, absurd empties.
      {"negative_batch", [](W& w) { w.qv.shape[0] = -2; w.call(); }, "q", {"-2"}},
      {"negative_head_dim_of_v", [](W& w) { w.vv.shape[3] = -6; w.call(); }, "v", {"-6"}},
      {"negative_key_length_int64_min", [](W& w) { w.kv.shape[2] = w.vv.shape[2] = kI64Min; w.call(); }, "k", {"-9223372036854775808"}},
      {"query_length_2p31_with_d_0", [](W& w) { empty_dims(w, 0, 0); w.qv.shape[2] = w.ov.shape[2] = p2(31); w.call(); }, "q", {"8388608", "2147483648"}},
      {"key_length_2p31_with_d_0", [](W& w) { empty_dims(w, 0, 0); w.kv.shape[2] = w.vv.shape[2] = p2(31); w.call(); }, "k", {"8388608", "2147483648"}},
      {"product_beyond_32_bits_in_small_buffer", [](W& w) {
         w.qv = maskattn::bhld<const float>(w.q.p(), 1, 1, 65536, 65536, 96);
         w.call();
       }, "q", {}},  // natively: a view of 2^32 floats in 96; in wasm32: more bytes than memory
      {"product_overflows_64_bits", [](W& w) { raw(w.qv, p2(20), p2(20), p2(20), p2(20)); w.call(); }, "q", {"overflow"}},
      {"bhld_helper_dims_overflow", [](W& w) { w.qv = maskattn::bhld<const float>(w.q.p(), 2, p2(40), p2(40), 4); w.call(); }, "q", {"overflow"}},
      {"empty_tensors_d_plus_dv_overflow", [](W& w) { empty_dims(w, kI64Max, kI64Max); w.call(); }, "memory", {"does not fit"}},
      {"empty_tensors_dv_int64_max", [](W& w) { empty_dims(w, 1, kI64Max); w.call(); }, "memory", {"does not fit"}},
      {"empty_tensors_d_2p62", [](W& w) { empty_dims(w, p2(62), p2(62)); w.call(); }, "memory", {"does not fit"}},
      {"weights_of_empty_tensors_overflow", [](W& w) {
         empty_dims(w, 0, 0);
         raw(w.qv, 1, p2(20), p2(23), 0); raw(w.ov, 1, p2(20), p2(23), 0);
         raw(w.kv, 1, 1, p2(23), 0); raw(w.vv, 1, 1, p2(23), 0);
         w.extra.weights = w.weights.p();
         w.call();
       }, "weights", {"overflow"}},
      {"lse_of_empty_tensors_overflow", [](W& w) {
         empty_dims(w, 0, 0);
         raw(w.qv, p2(30), p2(30), p2(23), 0); raw(w.ov, p2(30), p2(30), p2(23), 0);
         raw(w.kv, p2(30), 1, 1, 0); raw(w.vv, p2(30), 1, 1, 0);
         w.extra.lse = w.lse.p();
         w.call();
       }, "lse", {"overflow"}},

      // ---- Strides and sizes.
      {"q_stride_overflows", [](W& w) { w.qv.strides[0] = p2(62); w.call(); }, "q", {"overflow"}},
      {"k_negative_stride", [](W& w) { w.kv.strides[1] = -20; w.call(); }, "k", {"-20"}},
      {"v_inner_stride_0", [](W& w) { w.vv.strides[3] = 0; w.call(); }, "v", {"stride"}},
      {"out_rows_overlap", [](W& w) { w.ov.strides[2] = 0; w.call(); }, "out", {"overlap"}},
      {"out_inner_stride_2", [](W& w) { w.ov.strides[3] = 2; w.call(); }, "out", {"2"}},
      {"out_null", [](W& w) { w.ov.data = nullptr; w.call(); }, "out", {"null"}},
      {"out_size_short", [](W& w) { w.ov.size = 143; w.call(); }, "out", {"144", "143"}},
      {"out_value_dim_wrong", [](W& w) { w.ov.shape[3] = 4; w.call(); }, "out", {"6", "4"}},
      {"q_null", [](W& w) { w.qv.data = nullptr; w.call(); }, "q", {"null"}},
      {"q_size_minus_7", [](W& w) { w.qv.size = -7; w.call(); }, "q", {"-7"}},
      {"weights_size_short", [](W& w) { w.extra.weights_size = 119; w.call(); }, "weights", {"120", "119"}},
      {"lse_size_long", [](W& w) { w.extra.lse_size = 25; w.call(); }, "lse", {"24", "25"}},

      // ---- Masks and spans: sizes are the memory that is really there.
      {"allowed_size_one_byte", [](W& w) { w.opt.allowed = maskattn::make_mask<uint8_t>(w.allowed.p(), 2, 1, 1, 5, 1); w.call(); }, "allowed", {"10", "1"}},
      {"allowed_lk_stride_3", [](W& w) {
         w.opt.allowed = maskattn::make_mask<uint8_t>(w.allowed.p(), 1, 1, 1, 5, 10);
         w.opt.allowed.strides[3] = 3;
         w.call();
       }, "allowed", {"3"}},
      {"allowed_negative_stride", [](W& w) {
         w.opt.allowed = maskattn::make_mask<uint8_t>(w.allowed.p(), 2, 1, 1, 5, 10);
         w.opt.allowed.strides[0] = -5;
         w.call();
       }, "allowed", {"-5"}},
      {"allowed_stride_overflows", [](W& w) {
         w.opt.allowed = maskattn::make_mask<uint8_t>(w.allowed.p(), 2, 1, 1, 5);
         w.opt.allowed.strides[0] = kI64Max;
         w.call();
       }, "allowed", {"overflow"}},
      {"bias_size_short", [](W& w) { w.opt.bias = maskattn::make_mask<float>(w.bias.p(), 1, 1, 3, 5, 14); w.call(); }, "bias", {"15", "14"}},
      {"bias_lq_wrong", [](W& w) { w.opt.bias = maskattn::make_mask<float>(w.bias.p(), 1, 1, 2, 5); w.call(); }, "bias", {"2", "3"}},
      {"key_lengths_count_3", [](W& w) { w.opt.key_lengths = Span<int32_t>(w.key_lengths.p(), 3); w.call(); }, "key_lengths", {"2", "3"}},
      {"key_lengths_null_with_size", [](W& w) { w.opt.key_lengths = Span<int32_t>(nullptr, 2); w.call(); }, "key_lengths", {"null"}},
      {"query_lengths_above_lq", [](W& w) { static const std::vector<int32_t> l = {3, 4}; w.opt.query_lengths = l; w.call(); }, "query_lengths", {"4", "3"}},
      {"key_segments_only", [](W& w) { w.opt.key_segments = Span<int32_t>(w.key_segments.p(), 10); w.call(); }, "query_segments", {"6"}},
      {"query_segments_only", [](W& w) { w.opt.query_segments = Span<int32_t>(w.query_segments.p(), 6); w.call(); }, "key_segments", {"10"}},
      {"query_segments_short", [](W& w) {
         w.opt.query_segments = Span<int32_t>(w.query_segments.p(), 5);
         w.opt.key_segments = Span<int32_t>(w.key_segments.p(), 10);
         w.call();
       }, "query_segments", {"6", "5"}},
      {"key_segments_long", [](W& w) {
         w.opt.query_segments = Span<int32_t>(w.query_segments.p(), 6);
         w.opt.key_segments = Span<int32_t>(w.key_segments.p(), 11);
         w.call();
       }, "key_segments", {"10", "11"}},
      {"alibi_count_is_hkv", [](W& w) { w.opt.alibi_slopes = Span<float>(w.slopes.p(), 2); w.call(); }, "alibi_slopes", {"4", "2"}},
      {"alibi_slope_inf", [](W& w) { static const std::vector<float> s = {0.5f, 0.5f, 0.5f, kInf}; w.opt.alibi_slopes = s; w.call(); }, "alibi_slopes", {"inf"}},

      {"sinks_count_is_hkv", [](W& w) { w.opt.sinks = Span<float>(w.slopes.p(), 2); w.call(); }, "sinks", {"4", "2"}},
      {"sinks_nan", [](W& w) { static const std::vector<float> s = {0.5f, kNaN, 0.5f, 0.5f}; w.opt.sinks = s; w.call(); }, "sinks[1]", {"nan"}},
      {"sinks_plus_inf", [](W& w) { static const std::vector<float> s = {kInf, 0.5f, 0.5f, 0.5f}; w.opt.sinks = s; w.call(); }, "sinks[0]", {"inf"}},
      {"sinks_null_with_size", [](W& w) { w.opt.sinks = Span<float>(nullptr, 4); w.call(); }, "sinks", {"null"}},
      {"sinks_minus_nan", [](W& w) { static const std::vector<float> s = {0.5f, 0.5f, 0.5f, -kNaN}; w.opt.sinks = s; w.call(); }, "sinks[3]", {"nan"}},
      {"alibi_slope_beyond_flt_max_over_2p31", [](W& w) {
         static const std::vector<float> s = {0.5f, 0.5f, std::nextafter(std::numeric_limits<float>::max() / 2147483648.0f, kInf), 0.5f};
         w.opt.alibi_slopes = s;
         w.call();
       }, "alibi_slopes[2]", {"2^31", "float32"}},
      {"alibi_slope_minus_flt_max", [](W& w) {
         static const std::vector<float> s = {-std::numeric_limits<float>::max(), 0.5f, 0.5f, 0.5f};
         w.opt.alibi_slopes = s;
         w.call();
       }, "alibi_slopes[0]", {"2^31"}},
      {"alibi_slope_nan", [](W& w) { static const std::vector<float> s = {0.5f, kNaN, 0.5f, 0.5f}; w.opt.alibi_slopes = s; w.call(); }, "alibi_slopes[1]", {"nan"}},

      // ---- RoPE: every field, in attention(), a cache's configuration and attend; the frequencies
      // theta^(-2i/dims) and angles a base derives (a subnormal or tiny base overflows them at dims 64).
      {"rope_theta_0", [](W& w) { w.opt.rope = rope(0); w.call(); }, "rope.theta", {"> 0", "0"}},
      {"rope_theta_minus_0", [](W& w) { w.opt.rope = rope(-0.0); w.call(); }, "rope.theta", {"-0"}},
      {"rope_theta_negative", [](W& w) { w.opt.rope = rope(-10000); w.call(); }, "rope.theta", {"-10000"}},
      {"rope_theta_nan", [](W& w) { w.opt.rope = rope(std::nan("")); w.call(); }, "rope.theta", {"nan"}},
      {"rope_theta_inf", [](W& w) { w.opt.rope = rope(HUGE_VAL); w.call(); }, "rope.theta", {"inf"}},
      {"rope_theta_smallest_subnormal_d64", [](W& w) { head_dim_64(w); w.opt.rope = rope(5e-324); w.call(); }, "rope.theta", {"too small", "dims = 64", "overflows"}},
      {"rope_theta_1e-320_d64", [](W& w) { head_dim_64(w); w.opt.rope = rope(1e-320); w.call(); }, "rope.theta", {"dims = 64", "9.9998886718268"}},
      {"rope_theta_1e-310_d64", [](W& w) { head_dim_64(w); w.opt.rope = rope(1e-310); w.call(); }, "rope.theta", {"dims = 64"}},
      {"rope_theta_subnormal_dims_28_of_64", [](W& w) { head_dim_64(w); w.opt.rope = rope(5e-324, 28); w.call(); }, "rope.theta", {"dims = 28"}},
      {"rope_dims_odd", [](W& w) { w.opt.rope = rope(10000, 3); w.call(); }, "rope.dims", {"even", "3"}},
      {"rope_dims_above_d", [](W& w) { w.opt.rope = rope(10000, 6); w.call(); }, "rope.dims", {"D = 4", "6"}},
      {"rope_dims_negative", [](W& w) { w.opt.rope = rope(10000, -2); w.call(); }, "rope.dims", {"-2"}},
      {"rope_dims_int64_min", [](W& w) { w.opt.rope = rope(10000, kI64Min); w.call(); }, "rope.dims", {"-9223372036854775808"}},
      {"rope_dims_2p31", [](W& w) { w.opt.rope = rope(10000, p2(31)); w.call(); }, "rope.dims", {"2147483648"}},
      {"rope_odd_head_dim", [](W& w) { empty_dims(w, 3, 3); w.opt.rope = rope(10000); w.call(); }, "rope.dims", {"odd"}},
      {"rope_layout_7", [](W& w) { w.opt.rope = rope(10000, 0, 7); w.call(); }, "rope.layout", {"7"}, type},
      {"rope_layout_minus_1", [](W& w) { w.opt.rope = rope(10000, 0, -1); w.call(); }, "rope.layout", {"-1"}, type},
      {"rope_offset_minus_1", [](W& w) { w.opt.rope = rope(10000, 0, 0, -1); w.call(); }, "rope.offset", {"-1"}},
      {"rope_offset_2p31", [](W& w) { w.opt.rope = rope(10000, 0, 0, p2(31)); w.call(); }, "rope.offset", {"2147483648"}},
      {"rope_offset_2p53", [](W& w) { w.opt.rope = rope(10000, 0, 0, p2(53)); w.call(); }, "rope.offset", {"9007199254740992"}},
      {"rope_offset_int64_max", [](W& w) { w.opt.rope = rope(10000, 0, 0, kI64Max); w.call(); }, "rope.offset", {"9223372036854775807"}},
      {"attend_with_rope", [](W& w) {
         maskattn::Options o = KVCache::default_options();
         o.rope = rope(10000);
         w.f32.attend(w.attend_q(), w.attend_out(), o);
       }, "rope", {"cache's own"}},
      {"config_rope_theta_smallest_subnormal_d64", [](W&) { config_with_rope(rope(5e-324), 64); }, "rope.theta", {"dims = 64"}},
      {"config_rope_theta_1e-320_d64", [](W&) { config_with_rope(rope(1e-320), 64); }, "rope.theta", {"dims = 64"}},
      {"config_rope_theta_nan", [](W&) { config_with_rope(rope(std::nan(""))); }, "rope.theta", {"nan"}},
      {"config_rope_dims_above_head_dim", [](W&) { config_with_rope(rope(10000, 8)); }, "rope.dims", {"D = 4"}},
      {"config_rope_odd_head_dim", [](W&) { config_with_rope(rope(10000), 5); }, "rope.dims", {"odd"}},
      {"config_rope_layout_2", [](W&) { config_with_rope(rope(10000, 0, 2)); }, "rope.layout", {"2"}, type},
      {"config_rope_offset_2p31", [](W&) { config_with_rope(rope(10000, 0, 0, p2(31))); }, "rope.offset", {"2147483648"}},
      // RoPE scaling: a type from a bad cast, fields that are not positive, and factors whose derived
      // frequencies or attention factor would not be finite (at head dim 4: 2 pairs).
      {"rope_scaling_type_99", [](W& w) { w.opt.rope = scaled(static_cast<maskattn::RopeScalingType>(99)); w.call(); }, "rope.scaling.type", {"99"}, type},
      {"rope_scaling_linear_factor_0", [](W& w) { w.opt.rope = scaled(maskattn::RopeScalingType::linear); w.call(); }, "rope.scaling.factor", {"0"}},
      {"rope_scaling_linear_factor_nan", [](W& w) {
         w.opt.rope = scaled(maskattn::RopeScalingType::linear, std::nan(""));
         w.call();
       }, "rope.scaling.factor", {"nan"}},
      {"rope_scaling_linear_factor_1e-300_frequency_overflows", [](W& w) {
         w.opt.rope = scaled(maskattn::RopeScalingType::linear, 1e-300);
         w.call();
       }, "rope.scaling", {"not finite"}},
      {"rope_scaling_factors_count_3", [](W& w) {
         maskattn::Rope r = scaled(maskattn::RopeScalingType::factors);
         r.scaling.freq_factors = {1, 1, 1};
         w.opt.rope = r;
         w.call();
       }, "rope.scaling.freq_factors", {"2", "3"}},
      {"rope_scaling_factors_subnormal_divisor", [](W& w) {
         maskattn::Rope r = scaled(maskattn::RopeScalingType::factors);
         r.scaling.freq_factors = {1, 5e-324};
         w.opt.rope = r;
         w.call();
       }, "rope.scaling", {"not finite"}},
      {"rope_scaling_attention_factor_inf", [](W& w) {
         maskattn::Rope r = scaled(maskattn::RopeScalingType::factors);
         r.scaling.freq_factors = {1, 1};
         r.scaling.attention_factor = HUGE_VAL;
         w.opt.rope = r;
         w.call();
       }, "rope.scaling.attention_factor", {"inf"}},
      {"rope_scaling_yarn_mscale_ratio_negative", [](W& w) {
         maskattn::Rope r = scaled(maskattn::RopeScalingType::yarn, 4);
         r.scaling.original_max_positions = 4096;
         r.scaling.mscale = -1000;
         r.scaling.mscale_all_dim = 1;
         w.opt.rope = r;
         w.call();
       }, "rope.scaling", {"attention factor"}},
      {"rope_scaling_llama3_original_0", [](W& w) {
         maskattn::Rope r = scaled(maskattn::RopeScalingType::llama3, 8);
         r.scaling.low_freq_factor = 1;
         r.scaling.high_freq_factor = 4;
         w.opt.rope = r;
         w.call();
       }, "rope.scaling.original_max_positions", {"0"}},
      {"config_rope_scaling_linear_factor_1e-300", [](W&) { config_with_rope(scaled(maskattn::RopeScalingType::linear, 1e-300)); }, "rope.scaling", {"not finite"}},
      {"tree_length_wrong", [](W& w) { static const std::vector<int32_t> t = {-1, 0}; w.opt.tree = t; w.call(); }, "tree", {"Lq = 3", "2"}},
      {"tree_parent_not_earlier", [](W& w) { static const std::vector<int32_t> t = {-1, 2, 0}; w.opt.tree = t; w.call(); }, "tree[1]", {"earlier", "2"}},
      {"tree_parent_self", [](W& w) { static const std::vector<int32_t> t = {-1, 0, 2}; w.opt.tree = t; w.call(); }, "tree[2]", {"2"}},
      {"tree_per_batch_second_bad", [](W& w) { static const std::vector<int32_t> t = {-1, 0, 1, -1, -2, 0}; w.opt.tree = t; w.call(); }, "tree[4]", {"-2"}},
      {"tree_longer_than_keys", [](W& w) {
         static const std::vector<int32_t> t = {-1, 0, 1}, lengths = {5, 2};
         w.opt.tree = t;
         w.opt.key_lengths = lengths;
         w.call();
       }, "tree", {"sequence 1 has 2 keys"}},
      {"tree_with_query_lengths", [](W& w) {
         static const std::vector<int32_t> t = {-1, 0, 1};
         w.opt.tree = t;
         w.opt.query_lengths = Span<int32_t>(w.query_lengths.p(), 2);
         w.call();
       }, "tree", {"query_lengths"}},

      // ---- Other options, and enums from a bad cast (a binding's garbage).
      {"prefix_negative", [](W& w) { w.opt.prefix = -3; w.call(); }, "prefix", {"-3"}},
      {"window_left_int64_min", [](W& w) { w.opt.window.left = kI64Min; w.call(); }, "window", {"-9223372036854775808"}},
      {"window_right_minus_2", [](W& w) { w.opt.window.right = -2; w.call(); }, "window", {"-2"}},
      {"threads_0", [](W& w) { w.opt.threads = 0; w.call(); }, "threads", {"0"}},
      {"threads_2000", [](W& w) { w.opt.threads = 2000; w.call(); }, "threads", {"2000"}},
      {"target_99", [](W& w) { w.opt.target = static_cast<maskattn::Target>(99); w.call(); }, "target", {}},
      {"kernel_9", [](W& w) { w.opt.kernel = static_cast<maskattn::Kernel>(9); w.call(); }, "kernel", {"9"}, type},
      {"fully_masked_5", [](W& w) { w.opt.fully_masked = static_cast<maskattn::FullyMasked>(5); w.call(); }, "fully_masked", {"5"}, type},
      {"align_7", [](W& w) { w.opt.align = static_cast<maskattn::Align>(7); w.call(); }, "align", {"7"}, type},

      // ---- KV cache: appends.
      {"append_past_capacity", [](W& w) { w.f32.append(w.append_k(), w.append_v()); }, "sequence[1]", {"capacity is 6"}},
      {"append_past_capacity_float16", [](W& w) { w.f16.append(w.append_k(), w.append_v()); }, "sequence[1]", {"capacity is 6"}},
      {"append_counts_past_capacity_second_only", [](W& w) {
         static const std::vector<int32_t> counts = {2, 2};
         w.f32.append(w.append_k(), w.append_v(), counts);
       }, "sequence[1]", {"nothing was written"}},
      {"append_counts_count_3", [](W& w) { w.f32.append(w.append_k(), w.append_v(), Span<int32_t>(w.counts.p(), 3)); }, "counts", {"2", "3"}},
      {"append_counts_above_t", [](W& w) { static const std::vector<int32_t> c = {3, 0}; w.f32.append(w.append_k(), w.append_v(), c); }, "counts[0]", {"3"}},
      {"append_counts_negative", [](W& w) { static const std::vector<int32_t> c = {1, -1}; w.f32.append(w.append_k(), w.append_v(), c); }, "counts[1]", {"-1"}},
      {"append_k_head_dim_wrong", [](W& w) { w.f32.append(maskattn::bhld<const float>(w.ak.p(), 2, 2, 1, 8), w.append_v()); }, "k", {"8"}},
      {"append_v_tokens_differ_from_k", [](W& w) { w.f32.append(w.append_k(), maskattn::bhld<const float>(w.av.p(), 2, 2, 1, 6)); }, "v", {"1"}},
      {"append_k_size_short", [](W& w) { w.f32.append(maskattn::bhld<const float>(w.ak.p(), 2, 2, 2, 4, 31), w.append_v()); }, "k", {"32", "31"}},
      {"append_k_null", [](W& w) { w.f32.append(maskattn::bhld<const float>(nullptr, 2, 2, 2, 4), w.append_v()); }, "k", {"null"}},
      {"append_halves_size_short", [](W& w) {
         w.f16.append(maskattn::HalfTensor(maskattn::bhld<const uint16_t>(w.hk.p(), 2, 2, 1, 4, 16)),
                      maskattn::HalfTensor(maskattn::bhld<const uint16_t>(w.hv.p(), 2, 2, 1, 6, 23)));
       }, "v", {"24", "23"}},
      {"append_beyond_max_sequence_length_ring", [](W& w) {
         // A ring never runs out of room, but its positions are int32: one past 2^31 - 1 (a long
         // append costs what the ring keeps, so 2^31 tokens take 512 of them).
         std::vector<float> big(size_t(p2(22)), 0.0f);
         KVCacheConfig c = cache_config(KVType::float32, 3, 3);
         c.batch = c.kv_heads = c.head_dim = c.value_dim = 1;
         KVCache r(c);
         for (int n = 0; n < 511; ++n)
           r.append(maskattn::bhld<const float>(big.data(), 1, 1, p2(22), 1), maskattn::bhld<const float>(big.data(), 1, 1, p2(22), 1));
         r.append(maskattn::bhld<const float>(big.data(), 1, 1, p2(22) - 1, 1), maskattn::bhld<const float>(big.data(), 1, 1, p2(22) - 1, 1));
         r.append(maskattn::bhld<const float>(big.data(), 1, 1, 1, 1), maskattn::bhld<const float>(big.data(), 1, 1, 1, 1));
       }, "sequence[0]", {"2147483647"}},

      // ---- KV cache: truncate, attend.
      {"truncate_beyond_length", [](W& w) { static const std::vector<int32_t> l = {4, 5}; w.f32.truncate(l); }, "lengths[0]", {"3", "4"}},
      {"truncate_negative", [](W& w) { static const std::vector<int32_t> l = {3, -1}; w.f32.truncate(l); }, "lengths[1]", {"-1"}},
      {"truncate_count_1", [](W& w) { w.f32.truncate(Span<int32_t>(w.lengths.p(), 1)); }, "lengths", {"2", "1"}},
      {"truncate_null", [](W& w) { w.f16.truncate(Span<int32_t>()); }, "lengths", {"2"}},
      {"attend_q_head_dim_wrong", [](W& w) { w.f32.attend(maskattn::bhld<const float>(w.cq.p(), 2, 4, 1, 2), w.attend_out()); }, "q", {"4", "2"}},
      {"attend_q_batch_wrong", [](W& w) {
         w.f32.attend(maskattn::bhld<const float>(w.cq.p(), 1, 4, 1, 4), maskattn::bhld(w.cout.p(), 1, 4, 1, 6));
       }, "q", {"2", "1"}},
      {"attend_q_heads_not_multiple", [](W& w) {
         w.f16.attend(maskattn::bhld<const float>(w.cq.p(), 2, 3, 1, 4), maskattn::bhld(w.cout.p(), 2, 3, 1, 6));
       }, "q", {"3"}},
      {"attend_key_lengths_given", [](W& w) {
         maskattn::Options o = KVCache::default_options();
         o.key_lengths = Span<int32_t>(w.key_lengths.p(), 2);
         w.f32.attend(w.attend_q(), w.attend_out(), o);
       }, "key_lengths", {"implied"}},
      {"attend_out_value_dim_wrong", [](W& w) { w.f32.attend(w.attend_q(), maskattn::bhld(w.cout.p(), 2, 4, 1, 4)); }, "out", {"6", "4"}},
      {"attend_weights_size_wrong", [](W& w) {
         maskattn::ExtraOutputs e;
         e.weights = w.cw.p();
         e.weights_size = 39;
         w.f32.attend(w.attend_q(), w.attend_out(), KVCache::default_options(), e);
       }, "weights", {"40", "39"}},
      {"attend_softcap_subnormal", [](W& w) {
         maskattn::Options o = KVCache::default_options();
         o.softcap = 1e-40f;
         w.f16.attend(w.attend_q(), w.attend_out(), o);
       }, "softcap", {"normal"}},
      {"attend_ring_reaches_overwritten_position", [](W& w) {
         maskattn::Options o = KVCache::default_options();
         o.causal = false;
         o.window.left = -1;  // unbounded left: the ring's own rule still caps it at W - 1
         w.ring.attend(maskattn::bhld<const float>(w.cq.p(), 2, 2, 2, 4), maskattn::bhld(w.cout.p(), 2, 2, 2, 6), o);
       }, "q", {"overwritten"}},

      // ---- merge_attention: the outputs are the world's own q / out buffers seen as parts.
      {"merge_no_parts", [](W& w) { maskattn::merge_attention(Span<maskattn::AttentionPart>(), w.ov); }, "parts", {"at least one"}},
      {"merge_parts_shapes_differ", [](W& w) {
         const std::vector<maskattn::AttentionPart> parts = {
             {maskattn::bhld<const float>(w.q.p(), 2, 4, 3, 4), w.lse.p()}, {maskattn::bhld<const float>(w.q.p(), 2, 4, 2, 4), w.lse.p()}};
         maskattn::merge_attention(parts, maskattn::bhld(w.out.p(), 2, 4, 3, 4));
       }, "parts[1].output", {"[2, 4, 3, 4]", "[2, 4, 2, 4]"}},
      {"merge_lse_null", [](W& w) {
         const std::vector<maskattn::AttentionPart> parts = {{maskattn::bhld<const float>(w.q.p(), 2, 4, 3, 4), nullptr}};
         maskattn::merge_attention(parts, maskattn::bhld(w.out.p(), 2, 4, 3, 4));
       }, "parts[0].lse", {"null"}},
      {"merge_out_shape_differs", [](W& w) {
         const std::vector<maskattn::AttentionPart> parts = {{maskattn::bhld<const float>(w.q.p(), 2, 4, 3, 4), w.lse.p()}};
         maskattn::merge_attention(parts, maskattn::bhld(w.out.p(), 2, 4, 3, 6));
       }, "out", {"[2, 4, 3, 4]"}},
      {"merge_part_buffer_short", [](W& w) {
         const std::vector<maskattn::AttentionPart> parts = {{maskattn::bhld<const float>(w.q.p(), 2, 4, 3, 4, 95), w.lse.p()}};
         maskattn::merge_attention(parts, maskattn::bhld(w.out.p(), 2, 4, 3, 4));
       }, "parts[0].output", {"96", "95"}},

      {"merge_no_rows_out_shape_differs", [](W& w) {  // no rows to merge, but the shapes are still checked
         const std::vector<maskattn::AttentionPart> parts = {{maskattn::bhld<const float>(nullptr, p2(45), 1, 0, 8), nullptr}};
         maskattn::merge_attention(parts, maskattn::bhld(w.out.p(), p2(45), 1, 0, 6));
       }, "out", {"[35184372088832, 1, 0, 8]"}},
      {"merge_no_rows_parts_differ", [](W&) {
         const std::vector<maskattn::AttentionPart> parts = {{maskattn::bhld<const float>(nullptr, p2(31), p2(31), 0, 8), nullptr},
                                                             {maskattn::bhld<const float>(nullptr, p2(31), p2(31), 0, 9), nullptr}};
         maskattn::merge_attention(parts, maskattn::bhld<float>(nullptr, p2(31), p2(31), 0, 8));
       }, "parts[1].output", {"9"}},

      // ---- the quantized and the paged cache.
      {"q8_append_past_capacity", [](W& w) { w.q8.append(w.append_k(), w.append_v()); }, "sequence[1]", {"capacity is 6"}},
      {"q8_append_halves", [](W& w) {
         w.q8.append(maskattn::bhld<const uint16_t>(w.hk.p(), 2, 2, 2, 4, int64_t(w.hk.size())),
                     maskattn::bhld<const uint16_t>(w.hv.p(), 2, 2, 2, 6, int64_t(w.hv.size())));
       }, "k", {"float16", "bfloat16"}, type},
      {"q8_truncate_beyond_length", [](W& w) { const std::vector<int32_t> l = {4, 5}; w.q8.truncate(l); }, "lengths[0]", {"3", "4"}},
      {"paged_append_short_k", [](W& w) {
         w.paged.append(maskattn::bhld<const float>(w.ak.p(), 2, 2, 2, 4, 31), w.append_v());
       }, "k", {"32", "31"}},
      {"paged_fork_onto_live", [](W& w) { w.paged.fork(0, 1); }, "dst", {"empty"}},
      {"paged_keep_not_a_child", [](W& w) {
         const std::vector<int32_t> tree = {-1, 0, 0}, path = {0, 2, 1};
         w.paged.keep(1, tree, path);
       }, "path[2]", {"not a child"}},
      {"paged_keep_tree_longer_than_sequence", [](W& w) {
         const std::vector<int32_t> tree = {-1, 0, 1, 2, 3, 4};
         w.paged.keep(0, tree, Span<int32_t>());
       }, "tree", {"6 nodes"}},
      {"paged_attend_q_head_dim", [](W& w) {
         w.paged.attend(maskattn::bhld<const float>(w.cq.p(), 2, 2, 2, 3), w.attend_out());
       }, "q", {"3"}},

      // ---- KV cache: fork and keep.
      {"fork_onto_live_sequence", [](W& w) { w.f32.fork(0, 1); }, "dst", {"holds 5", "empty"}},
      {"fork_onto_itself", [](W& w) { w.f16.fork(1, 1); }, "dst", {"differ"}},
      {"fork_src_out_of_range", [](W& w) { w.ring.fork(2, 0); }, "src", {"2"}},
      {"keep_path_not_a_child", [](W& w) {
         static const std::vector<int32_t> t = {-1, 0, 0}, path = {0, 2, 1};
         w.f32.keep(1, t, path);
       }, "path[2]", {"not a child"}},
      {"keep_path_starts_below_a_root", [](W& w) {
         static const std::vector<int32_t> t = {-1, 0, 0}, path = {1};
         w.f16.keep(0, t, path);
       }, "path[0]", {"root"}},
      {"keep_tree_longer_than_sequence", [](W& w) {
         static const std::vector<int32_t> t = {-1, 0, 1, 2}, path = {0};
         w.f32.keep(0, t, path);
       }, "tree", {"4 nodes", "holds 3"}},
      {"keep_tree_reaches_overwritten", [](W& w) {
         static const std::vector<int32_t> t = {-1, 0, 1, 2}, path = {0};
         w.ring.keep(0, t, path);
       }, "tree", {"4 nodes"}},
      {"keep_sequence_out_of_range", [](W& w) {
         static const std::vector<int32_t> t = {-1}, path = {0};
         w.f32.keep(-1, t, path);
       }, "b", {"-1"}},
      {"attend_tree_parent_bad", [](W& w) {
         maskattn::Options o = KVCache::default_options();
         static const std::vector<int32_t> t = {0};
         o.tree = t;
         w.f32.attend(w.attend_q(), w.attend_out(), o);
       }, "tree[0]", {"0"}},
      {"config_sink_tokens_without_window", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 4); c.sink_tokens = 1; KVCache x(c); }, "sink_tokens", {"window"}},
      {"config_sink_tokens_beyond_capacity", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 4, 3); c.sink_tokens = 2; KVCache x(c); }, "capacity", {"5"}},
      {"config_page_size_negative", [](W&) { KVCacheConfig c = cache_config(KVType::q8, 4); c.page_size = -1; KVCache x(c); }, "page_size", {"-1"}},

      // ---- KV cache: use after it was moved from (C++'s "use after dispose").
      {"moved_from_append", [](W& w) {
         KVCache a(cache_config(KVType::float32, 4));
         KVCache b = std::move(a);
         a.append(w.append_k(), w.append_v());  // NOLINT(bugprone-use-after-move): the point of the row
       }, "cache", {"moved"}},
      {"moved_from_attend", [](W& w) {
         KVCache a(cache_config(KVType::float16, 4));
         KVCache b(std::move(a));
         a.attend(w.attend_q(), w.attend_out());  // NOLINT(bugprone-use-after-move)
       }, "cache", {"moved"}},
      {"moved_from_truncate", [](W& w) {
         KVCache a(cache_config(KVType::float32, 4));
         KVCache b = std::move(a);
         a.truncate(Span<int32_t>(w.lengths.p(), 2));  // NOLINT(bugprone-use-after-move)
       }, "cache", {"moved"}},

      // ---- KV cache: configurations.
      {"config_batch_0", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 4); c.batch = 0; KVCache x(c); }, "batch", {"0"}},
      {"config_capacity_0", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 0); KVCache x(c); }, "capacity", {"0"}},
      {"config_capacity_above_max_length", [](W&) { KVCache x(cache_config(KVType::float32, p2(23) + 1)); }, "capacity", {"8388608", "8388609"}},
      {"config_window_above_capacity", [](W&) { KVCache x(cache_config(KVType::float32, 4, 5)); }, "capacity", {"5", "4"}},
      {"config_window_negative", [](W&) { KVCache x(cache_config(KVType::float32, 4, -1)); }, "window", {"-1"}},
      {"config_head_dim_0", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 4); c.head_dim = 0; KVCache x(c); }, "head_dim", {"0"}},
      {"config_value_dim_minus_2", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 4); c.value_dim = -2; KVCache x(c); }, "value_dim", {"-2"}},
      {"config_dtype_7", [](W&) { KVCacheConfig c = cache_config(KVType::float32, 4); c.dtype = static_cast<KVType>(7); KVCache x(c); }, "dtype", {"7"}, type},
      {"config_bytes_overflow", [](W&) { KVCacheConfig c = cache_config(KVType::float16, p2(23)); c.kv_heads = p2(40); KVCache x(c); }, "capacity", {"overflow"}},
      {"config_kv_heads_negative", [](W&) { KVCacheConfig c = cache_config(KVType::float16, 4); c.kv_heads = -3; KVCache x(c); }, "kv_heads", {"-3"}},
  };
  return table;
}

std::string row_name(const testing::TestParamInfo<Row>& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (c == '-' || c == '.') c = '_';
  return s;
}

class Hostile : public testing::TestWithParam<Row> {};

TEST_P(Hostile, RejectedByNameAndNothingWritten) {
  const Row& row = GetParam();
  auto w = std::make_unique<World>();
  const auto before = w->state();
  bool thrown = false;
  try {
    row.call(*w);
  } catch (const ArgumentError& e) {
    thrown = true;
    EXPECT_TRUE(names(e.argument(), row.arg)) << "argument() is \"" << e.argument() << "\", expected " << row.arg
                                              << "\n  what(): " << e.what();
    EXPECT_EQ(e.is_type_error(), row.kind == type) << "wrong kind of error (type vs range): " << e.what();
    for (const std::string& s : row.says)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << "what() should say \"" << s << "\": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a std::exception that is not an ArgumentError: " << e.what();
    thrown = true;
  }
  EXPECT_TRUE(thrown) << "no error: the mistake was accepted";
  const auto after = w->state();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(before[i] == after[i]) << kStateNames[i] << " was written (or a guard zone around it was)";
  EXPECT_EQ(w->stats.tiles_full + w->stats.tiles_mixed + w->stats.tiles_skipped, 0) << "stats were written";
}

INSTANTIATE_TEST_SUITE_P(Table, Hostile, testing::ValuesIn(rows()), row_name);

TEST(Hostile, TableHasAtLeastSixtyRows) { EXPECT_GE(rows().size(), 60u); }

// The world itself is valid: every call above fails only because of its one mistake.
TEST(Hostile, TheWorldIsValid) {
  World w;
  EXPECT_NO_THROW(w.call());
  World c;
  EXPECT_NO_THROW(c.f32.attend(c.attend_q(), c.attend_out()));
  EXPECT_NO_THROW(c.f16.attend(c.attend_q(), c.attend_out()));
  EXPECT_NO_THROW(c.ring.attend(c.attend_q(), c.attend_out()));
  EXPECT_NO_THROW(c.q8.attend(c.attend_q(), c.attend_out()));
  EXPECT_NO_THROW(c.paged.attend(c.attend_q(), c.attend_out()));
  EXPECT_EQ(c.paged.pages(0), c.paged.pages(1)) << "the fork shares its pages";
  World a;
  a.counts.p()[0] = 2;
  a.counts.p()[1] = 1;
  EXPECT_NO_THROW(a.f32.append(a.append_k(), a.append_v(), Span<int32_t>(a.counts.p(), 2)));
  a.lengths.p()[0] = 1;
  a.lengths.p()[1] = 0;
  EXPECT_NO_THROW(a.f16.truncate(Span<int32_t>(a.lengths.p(), 2)));
}

// Boundary values next to rows of the table are accepted (the checks are not off by one).
TEST(Hostile, BoundariesAreAccepted) {
  {
    World w;  // the smallest normal float is a valid softcap at scale 0.5 (ratio ~4e37 fits float)
    w.opt.softcap = std::numeric_limits<float>::min();
    EXPECT_NO_THROW(w.call());
    for (size_t i = 0; i < w.out.size(); ++i) ASSERT_FALSE(std::isnan(w.out.p()[i])) << i;
  }
  {
    World w;  // empty problem with modest D and Dv
    empty_dims(w, 4096, 4096);
    EXPECT_NO_THROW(w.call());
  }
  {
    World w;  // segments with Lk = 0: no key ids to give (an empty std::vector has no data)
    w.extra = maskattn::ExtraOutputs{};
    w.kv.shape[2] = w.vv.shape[2] = 0;
    const std::vector<int32_t> none;
    w.opt.query_segments = Span<int32_t>(w.query_segments.p(), 6);
    w.opt.key_segments = none;
    EXPECT_NO_THROW(w.call());
    for (size_t i = 0; i < w.out.size(); ++i) ASSERT_EQ(w.out.p()[i], 0.0f) << "fully masked rows give 0";
  }
  {
    World w;  // empty tensors with any B: nothing to write, so nothing to do (visiting 2^40 rows took days)
    empty_dims(w, 0, 0);
    w.qv.shape[0] = w.kv.shape[0] = w.vv.shape[0] = w.ov.shape[0] = p2(40);
    w.qv.shape[2] = w.ov.shape[2] = 3;
    w.kv.shape[2] = w.vv.shape[2] = 5;
    EXPECT_NO_THROW(w.call());
  }
  {
    World w;  // empty K and V (Lk = 0) with null data and a real head stride (blhd): nothing is read,
              // and no pointer arithmetic on null (the reference did it; found by tests/fuzz)
    w.extra = maskattn::ExtraOutputs{};
    w.opt.stats = nullptr;
    w.kv = maskattn::blhd<const float>(nullptr, 2, 0, 2, 4);
    w.vv = maskattn::blhd<const float>(nullptr, 2, 0, 2, 6);
    EXPECT_NO_THROW(w.call());
    EXPECT_NO_THROW((void)maskattn::reference_attention(w.qv, w.kv, w.vv, w.opt));
    w.opt.target = maskattn::Target::reference;
    EXPECT_NO_THROW(w.call());
  }
  {
    World w;  // a moved-from cache answers its noexcept accessors as empty
    KVCache b = std::move(w.f32);
    EXPECT_TRUE(w.f32.lengths().empty());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(w.f32.byte_length(), 0);
    EXPECT_EQ(w.f32.key_data(), nullptr);
    w.f32.reset();
    EXPECT_EQ(b.lengths()[1], 5);
  }
}

// D = 0 with null Q and K data but real strides (rows of 3 floats that hold none): every score is
// 0, so each row is the mean of V and its lse log(Lk), on every target and kernel; with Dv = 0 too
// (V and the output null as well) only the lse is left. Nothing may do pointer arithmetic on null:
// the decode kernel did, on K and then on Q rows (found by tests/fuzz, B=1 Hq=3 Hkv=1 Lq=4 Lk=41
// D=0 Dv=19 in padded storage), until views with no elements got zero strides (make_problem,
// row_strides). Clang's UBSan flags it, GCC's sanitizer build does not, so the fuzz corpus keeps
// both inputs: tests/fuzz/corpus/finding-d0-null-{k,q}-padded-strides.
TEST(Hostile, EmptyHeadDimWithNullDataAndRealStrides) {
  const int64_t B = 1, Hq = 3, Hkv = 1, Lq = 4, Lk = 41;
  auto padded = [](int64_t b, int64_t h, int64_t l) {  // a [b, h, l, 0] view of nothing, rows 3 apart
    maskattn::TensorView<float> t;
    const int64_t shape[4] = {b, h, l, 0}, strides[4] = {h * (l * 3 + 2) + 5, l * 3 + 2, 3, 1};
    for (int d = 0; d < 4; ++d) {
      t.shape[d] = shape[d];
      t.strides[d] = strides[d];
    }
    t.size = 0;
    return t;
  };
  const ConstTensor q = padded(B, Hq, Lq), k = padded(B, Hkv, Lk);
  for (const int64_t Dv : {int64_t(19), int64_t(0)}) {
    std::vector<float> v(size_t(B * Hkv * Lk * Dv)), mean(size_t(Dv), 0.0f);
    for (size_t n = 0; n < v.size(); ++n) v[n] = float(n % 23) * 0.25f - 2.0f;
    for (int64_t j = 0; j < Lk; ++j)
      for (int64_t c = 0; c < Dv; ++c) mean[size_t(c)] += v[size_t(j * Dv + c)] / float(Lk);
    const ConstTensor vv = Dv ? maskattn::bhld<const float>(v.data(), B, Hkv, Lk, Dv) : ConstTensor(padded(B, Hkv, Lk));
    for (const maskattn::Target target : maskattn::kKernelTargets) {
      if (!maskattn::target_available(target)) continue;
      for (const Kernel kernel : maskattn::kKernels) {
        const std::string what = std::string(maskattn::target_name(target)) + " kernel " + std::to_string(int(kernel)) +
                                 " Dv " + std::to_string(Dv);
        std::vector<float> out(size_t(B * Hq * Lq * Dv), 777.0f), lse(size_t(B * Hq * Lq), 777.0f);
        maskattn::Options opt;
        opt.target = target;
        opt.kernel = kernel;
        maskattn::ExtraOutputs extra;
        extra.lse = lse.data();
        extra.lse_size = int64_t(lse.size());
        const MutableTensor o = Dv ? maskattn::bhld(out.data(), B, Hq, Lq, Dv) : padded(B, Hq, Lq);
        ASSERT_NO_THROW(maskattn::attention(q, k, vv, o, opt, extra)) << what;
        for (size_t n = 0; n < out.size(); ++n) ASSERT_NEAR(out[n], mean[n % size_t(Dv)], 1e-5f) << what << " at " << n;
        for (size_t n = 0; n < lse.size(); ++n) ASSERT_NEAR(lse[n], std::log(float(Lk)), 1e-5f) << what << " row " << n;
      }
    }
  }
}

// Parts with no rows (any dimension 0, however large the others) merge into an empty result at
// once: the merge returned only after visiting 2^45 empty (b, h) pairs (hours).
TEST(Hostile, MergeOfNoRowsReturnsAtOnce) {
  const auto started = std::chrono::steady_clock::now();
  for (auto dims : {std::array<int64_t, 4>{p2(45), 1, 0, 8}, std::array<int64_t, 4>{p2(31), p2(31), 0, 8},
                    std::array<int64_t, 4>{p2(32), 1, 0, 8}, std::array<int64_t, 4>{1, p2(40), 0, 0}}) {
    const auto part = maskattn::bhld<const float>(nullptr, dims[0], dims[1], dims[2], dims[3]);
    const std::vector<maskattn::AttentionPart> parts = {{part, nullptr}, {part, nullptr}};
    EXPECT_NO_THROW(maskattn::merge_attention(parts, maskattn::bhld<float>(nullptr, dims[0], dims[1], dims[2], dims[3])));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 5.0) << "merging parts with no rows must not visit their (b, h) pairs";
}

// Finite input reads back finite from every quantized format, at both ends of float's range: q8 and
// q4 blocks at ±FLT_MAX (q8's d = amax / 127 rounded up, and d·127 overflowed to infinity), blocks
// so small that a scale's reciprocal overflows (0 · inf made a zero element read back as amax),
// subnormal blocks, blocks of -0; keys rotated too, where the rotated row fits in float (the
// Hadamard's butterflies overflowed before its final 1/sqrt(n)). Within the documented bounds
// (docs/semantics.md "Quantized caches"), where the scale is a normal float.
TEST(Hostile, QuantizedCachesStayFiniteAtFloatLimits) {
  constexpr float kMax = std::numeric_limits<float>::max();
  constexpr int64_t D = 64;  // two blocks of 32
  // Rows of two blocks each: [block 0 | block 1].
  std::vector<std::vector<float>> rows;
  auto row = [&](auto f0, auto f1) {
    std::vector<float> r(D);
    for (int64_t i = 0; i < 32; ++i) { r[size_t(i)] = f0(i); r[size_t(32 + i)] = f1(i); }
    rows.push_back(r);
  };
  auto alternating = [](float a) { return [a](int64_t i) { return i % 3 == 0 ? a : i % 3 == 1 ? -a : a * 0.25f; }; };
  auto one = [](float a) { return [a](int64_t i) { return i == 5 ? a : 0.0f; }; };
  row(alternating(kMax), [](int64_t) { return -0.0f; });                 // ±FLT_MAX | -0
  row(one(kMax), one(-kMax));                                            // one FLT_MAX in each block (rotates finitely)
  row(alternating(1e-45f), alternating(3e-39f));                         // subnormal blocks
  row(alternating(1e-37f), alternating(2e-38f));                         // scales whose reciprocal overflows
  row(alternating(kMax / 127.0f * 126.5f), alternating(0.999f * kMax));  // near the edge of q8's last step
  const int64_t T = int64_t(rows.size());
  std::vector<float> k(size_t(T * D));
  for (int64_t t = 0; t < T; ++t) std::copy(rows[size_t(t)].begin(), rows[size_t(t)].end(), k.begin() + t * D);

  for (KVType type : {KVType::q8, KVType::q4})
    for (auto rotation : {maskattn::KeyRotation::none, maskattn::KeyRotation::hadamard}) {
      KVCacheConfig c;
      c.capacity = T;
      c.head_dim = c.value_dim = D;
      c.dtype = type;
      c.key_rotation = rotation;
      KVCache cache(c);
      cache.append(maskattn::bhld<const float>(k.data(), 1, 1, T, D), maskattn::bhld<const float>(k.data(), 1, 1, T, D));
      const KVCache::Contents got = cache.read(0);
      for (int64_t t = 0; t < T; ++t) {
        // Rows 0 and 4 rotated do not fit in float (norms of several FLT_MAX): they are stored as
        // NaN, as a non-finite block is. Every other row is finite.
        const bool keys_fit = rotation == maskattn::KeyRotation::none || (t != 0 && t != 4);
        for (int64_t blk = 0; blk < 2; ++blk) {
          double amax = 0;
          for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double(k[size_t(t * D + blk * 32 + i)])));
          const double bound = (type == KVType::q8 ? amax / 254 : amax / 8) * (1 + 1e-5);
          const bool normal_scale = amax / 127 >= std::numeric_limits<float>::min();
          for (int64_t i = 0; i < 32; ++i) {
            const size_t at = size_t(t * D + blk * 32 + i);
            const std::string where = std::string(type == KVType::q8 ? "q8" : "q4") +
                                      (rotation == maskattn::KeyRotation::none ? "" : " rotated") + " row " +
                                      std::to_string(t) + " element " + std::to_string(blk * 32 + i);
            ASSERT_TRUE(std::isfinite(got.value[at])) << "value, " << where << ": " << got.value[at];
            if (normal_scale) EXPECT_LE(std::fabs(double(got.value[at]) - k[at]), bound) << "value, " << where;
            if (keys_fit) {
              ASSERT_TRUE(std::isfinite(got.key[at])) << "key, " << where << ": " << got.key[at];
              if (rotation == maskattn::KeyRotation::none && normal_scale)
                EXPECT_LE(std::fabs(double(got.key[at]) - k[at]), bound) << "key, " << where;
            } else {
              EXPECT_TRUE(std::isnan(got.key[at])) << "key, " << where << ": a rotated row past float's range reads NaN";
            }
          }
        }
      }
    }
}

// Valid problems read only their own tensors: K, V, Q in buffers of exactly their size (the
// AddressSanitizer build reports any read past them). The sweep covers what the fuzzer found: with
// top-left alignment, a window whose diagonal lies beyond the valid keys, and a prefix, the decode
// kernel's key chunks reached past Lk.
TEST(Hostile, ValidProblemsReadOnlyTheirTensors) {
  std::vector<maskattn::Target> targets;
  for (auto t : maskattn::kKernelTargets)
    if (maskattn::target_available(t)) targets.push_back(t);
  int runs = 0;
  for (int64_t Lq : {1, 5, 12})
    for (int64_t Lk : {0, 1, 3, 70})
      for (int align = 0; align < 2; ++align)
        for (int64_t left : {-1, 0, 4})
          for (int64_t right : {-1, 0, 10})
            for (int64_t prefix : {0, 2, 5}) {
              const int64_t B = 2, H = 2, D = 3, Dv = 2;
              std::vector<float> q(size_t(B * H * Lq * D), 0.5f), k(size_t(B * H * Lk * D), 0.25f),
                  v(size_t(B * H * Lk * Dv), 1.0f), o(size_t(B * H * Lq * Dv));
              maskattn::Options opt;
              opt.align = align ? maskattn::Align::top_left : maskattn::Align::bottom_right;
              opt.window = {left, right};
              opt.prefix = prefix;
              const std::vector<int32_t> key_lengths = {int32_t(Lk), int32_t(Lk / 2)};
              opt.key_lengths = key_lengths;
              const auto qv = maskattn::bhld<const float>(q.data(), B, H, Lq, D, int64_t(q.size()));
              const auto kv = maskattn::bhld<const float>(k.data(), B, H, Lk, D, int64_t(k.size()));
              const auto vv = maskattn::bhld<const float>(v.data(), B, H, Lk, Dv, int64_t(v.size()));
              const auto ref = maskattn::reference_attention(qv, kv, vv, opt);
              for (auto t : targets)
                for (auto kernel : maskattn::kKernels) {
                  if (kernel == Kernel::automatic) continue;  // it runs one of the others
                  opt.target = t;
                  opt.kernel = kernel;
                  maskattn::attention(qv, kv, vv, maskattn::bhld(o.data(), B, H, Lq, Dv, int64_t(o.size())), opt);
                  ++runs;
                  for (size_t n = 0; n < o.size(); ++n)
                    ASSERT_NEAR(o[n], ref.out[n], 1e-5) << "Lq " << Lq << " Lk " << Lk << " align " << align << " window ("
                                                         << left << ", " << right << ") prefix " << prefix << " "
                                                         << maskattn::target_name(t) << " " << maskattn::kernel_name(kernel);
                }
            }
  EXPECT_GT(runs, 1000);
}

// ---------------------------------------------------------------------------------------------
// Who runs the threads: Options::executor, set_default_executor, set_thread_pool_config's spin_us.
// (Hosts that break the contract concurrently, or call tasks after returning: test_executor.cpp.)
// ---------------------------------------------------------------------------------------------

// Work big enough to split into tasks on every kernel: plain attention (q [1, 8, 2, 32] over 2600
// keys) and a cache of every dtype of maskattn/kv_types.inc (2 sequences of 2600 positions).
struct SplitWorld {
  static constexpr int64_t kKeys = 2600, kD = 32;
  std::vector<float> q, k, v, cq;
  std::vector<std::unique_ptr<KVCache>> caches;
  SplitWorld() : q(values(8 * 2 * kD, 1)), k(values(2 * kKeys * kD, 2)), v(values(2 * kKeys * kD, 3)), cq(values(2 * 8 * 2 * kD, 4)) {
    const KVType dtypes[] = {
#define MASKATTN_KV_TYPE(name, bits) KVType::name,
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
    };
    const std::vector<float> ck = values(2 * 2 * kKeys * kD, 5), cv = values(2 * 2 * kKeys * kD, 6);
    for (KVType t : dtypes) {
      KVCacheConfig c = cache_config(t, kKeys);
      c.head_dim = c.value_dim = kD;
      caches.push_back(std::make_unique<KVCache>(c));
      caches.back()->append(maskattn::bhld<const float>(ck.data(), 2, 2, kKeys, kD), maskattn::bhld<const float>(cv.data(), 2, 2, kKeys, kD));
    }
  }
  static std::vector<float> values(int64_t n, int seed) {
    std::vector<float> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f + float(seed));
    return x;
  }
  // Source 0: plain attention; source 1 + i: the cache of dtype i. O in a fresh vector.
  size_t sources() const { return 1 + caches.size(); }
  std::string name(size_t s) const { return s == 0 ? "attention" : std::string("cache_") + maskattn::kv_type_name(caches[s - 1]->config().dtype); }
  std::vector<float> run(size_t s, Kernel kernel, int threads, const maskattn::Executor* e) const {
    maskattn::Options o;
    o.causal = true;
    o.kernel = kernel;
    o.threads = threads;
    o.executor = e;
    if (s == 0) {
      std::vector<float> out(q.size());
      maskattn::attention(maskattn::bhld<const float>(q.data(), 1, 8, 2, kD), maskattn::bhld<const float>(k.data(), 1, 2, kKeys, kD),
                          maskattn::bhld<const float>(v.data(), 1, 2, kKeys, kD), maskattn::bhld(out.data(), 1, 8, 2, kD), o);
      return out;
    }
    std::vector<float> out(cq.size());
    caches[s - 1]->attend(maskattn::bhld<const float>(cq.data(), 2, 8, 2, kD), maskattn::bhld(out.data(), 2, 8, 2, kD), o);
    return out;
  }
  std::vector<std::vector<unsigned char>> inputs() const {
    std::vector<std::vector<unsigned char>> s;
    for (const std::vector<float>* x : {&q, &k, &v, &cq})
      s.emplace_back(reinterpret_cast<const unsigned char*>(x->data()), reinterpret_cast<const unsigned char*>(x->data() + x->size()));
    for (const auto& c : caches) s.push_back(contents_state(*c));
    return s;
  }
};

// An empty executor (a null parallel_for), per call or as the default, at 1 and 4 threads, in
// attention and in every cache's attend: ArgumentError("executor") of the type kind, nothing
// written, the default unchanged.
TEST(HostileExecutor, EmptyExecutorIsRejectedAndNothingWritten) {
  auto w = std::make_unique<World>();
  const auto before = w->state();
  const maskattn::Executor empty{};
  const auto expect_rejected = [](const char* what, const std::function<void()>& call) {
    try {
      call();
      ADD_FAILURE() << what << ": accepted";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), "executor") << what << ": " << e.what();
      EXPECT_TRUE(e.is_type_error()) << what;
      EXPECT_NE(std::string(e.what()).find("parallel_for is empty"), std::string::npos) << what << ": " << e.what();
    }
  };
  for (int threads : {1, 4}) {
    w->opt.executor = &empty;
    w->opt.threads = threads;
    expect_rejected("attention", [&] { w->call(); });
    for (KVCache* c : {&w->f32, &w->f16, &w->ring, &w->q8, &w->paged})
      expect_rejected("attend", [&] { c->attend(w->attend_q(), w->attend_out(), w->opt); });
  }
  expect_rejected("set_default_executor", [&] { maskattn::set_default_executor(empty); });
  const auto after = w->state();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i] == after[i]) << kStateNames[i] << " was written";
  EXPECT_EQ(w->stats.tiles_full + w->stats.tiles_mixed + w->stats.tiles_skipped, 0) << "stats were written";
  // The default is still maskattn's own pool: a call that splits into tasks gives the one-thread
  // answer (an empty default would throw std::bad_function_call).
  const SplitWorld split;
  EXPECT_TRUE(split.run(0, Kernel::automatic, 4, nullptr) == split.run(0, Kernel::automatic, 1, nullptr));
}

// spin_us outside [0, 1e6] microseconds (NaN of either sign, below 0 by a denormal, above 1e6 by one
// ulp, infinities): ArgumentError("spin_us") saying the range, and the setting is unchanged.
TEST(HostileExecutor, SpinTimeOutsideItsRangeIsRejected) {
  const maskattn::ThreadPoolConfig saved = maskattn::thread_pool_config();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double denormal = std::numeric_limits<double>::denorm_min();
  for (double bad : {nan, -nan, -1.0, -denormal, 1e6 + 1, std::nextafter(1e6, inf), inf, -inf,
                     std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest()}) {
    try {
      maskattn::set_thread_pool_config({bad});
      ADD_FAILURE() << "spin_us " << bad << " accepted";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), "spin_us") << bad;
      EXPECT_FALSE(e.is_type_error()) << bad;
      EXPECT_NE(std::string(e.what()).find("[0, 1e6] microseconds"), std::string::npos) << e.what();
    }
    EXPECT_EQ(maskattn::thread_pool_config().spin_us, saved.spin_us) << "spin_us " << bad << " changed the setting";
  }
}

// The edges inside the range are accepted: -0 and a denormal (both read back as 0: the spin time is
// kept in nanoseconds), 1e6 exactly.
TEST(HostileExecutor, SpinTimeBoundariesAreAccepted) {
  const maskattn::ThreadPoolConfig saved = maskattn::thread_pool_config();
  const double denormal = std::numeric_limits<double>::denorm_min();
  const std::pair<double, double> cases[] = {{-0.0, 0.0}, {denormal, 0.0}, {0.0, 0.0}, {0.001, 0.001}, {1e6, 1e6}};
  for (const auto& [given, read_back] : cases) {
    EXPECT_NO_THROW(maskattn::set_thread_pool_config({given})) << given;
    EXPECT_EQ(maskattn::thread_pool_config().spin_us, read_back) << given;
  }
  maskattn::set_thread_pool_config(saved);
  EXPECT_EQ(maskattn::thread_pool_config().spin_us, saved.spin_us);
}

// Hosts that break the contract without threads (so also in WebAssembly), on every kernel, for
// plain attention and a cache of every dtype: skipping tasks, calling one twice (with as many calls
// as tasks, so that a count of calls passes), calling indices outside [0, count), throwing. Each
// fails (ArgumentError naming the executor, or the host's own exception), never returns an answer,
// and leaves inputs and caches as they were; a host that keeps the contract in another order gives
// the one-thread answer bitwise. (A failed call's output is unspecified: tasks that ran wrote it.)
TEST(HostileExecutor, SerialHostsThatBreakTheContractFailOnEveryKernelAndCacheDtype) {
  using Task = const std::function<void(int64_t)>&;
  struct HostStopped {};  // the host's own error
  struct Host {
    const char* name;
    const char* says;  // nullptr: must give the one-thread answer; "" : throws the host's error
    std::function<void(int64_t, Task)> parallel_for;
  };
  const Host hosts[] = {
      {"backwards", nullptr, [](int64_t n, Task task) { for (int64_t i = n - 1; i >= 0; --i) task(i); }},
      {"skips_the_last", "returned before calling task(", [](int64_t n, Task task) { for (int64_t i = 0; i + 1 < n; ++i) task(i); }},
      {"skips_the_first", "returned before calling task(0)", [](int64_t n, Task task) { for (int64_t i = 1; i < n; ++i) task(i); }},
      {"runs_none", "returned before calling task(0)", [](int64_t, Task) {}},
      {"task_0_twice_and_no_last", "called task(0) twice", [](int64_t n, Task task) {
         task(0);
         for (int64_t i = 0; i + 1 < n; ++i) task(i);
       }},
      {"every_task_then_task_0", "called task(0) twice", [](int64_t n, Task task) {
         for (int64_t i = 0; i < n; ++i) task(i);
         task(0);
       }},
      {"task_count", "outside [0, ", [](int64_t n, Task task) { for (int64_t i = 0; i <= n; ++i) task(i); }},
      {"task_minus_1", "called task(-1), outside [0, ", [](int64_t n, Task task) { for (int64_t i = -1; i < n; ++i) task(i); }},
      {"task_int64_min", "outside [0, ", [](int64_t n, Task task) {
         task(kI64Min);
         for (int64_t i = 0; i < n; ++i) task(i);
       }},
      {"throws_after_task_0", "", [](int64_t, Task task) {
         task(0);
         throw HostStopped{};
       }},
  };
  const SplitWorld world;
  const auto inputs = world.inputs();
  for (size_t s = 0; s < world.sources(); ++s)
    for (const Kernel kernel : maskattn::kKernels) {
      const std::vector<float> expected = world.run(s, kernel, 1, nullptr);
      for (const Host& host : hosts) {
        const std::string what = world.name(s) + " " + maskattn::kernel_name(kernel) + " host " + host.name;
        int64_t most = 0;
        const maskattn::Executor e{[&](int64_t n, Task task) {
          if (n > most) most = n;
          host.parallel_for(n, task);
        }};
        try {
          const std::vector<float> out = world.run(s, kernel, 4, &e);
          EXPECT_EQ(host.says, nullptr) << what << ": no error";
          EXPECT_TRUE(out.size() == expected.size() && std::memcmp(out.data(), expected.data(), out.size() * 4) == 0)
              << what << ": not the one-thread answer";
        } catch (const ArgumentError& err) {
          EXPECT_TRUE(host.says && *host.says) << what << ": " << err.what();
          EXPECT_EQ(err.argument(), "executor") << what;
          if (host.says) EXPECT_NE(std::string(err.what()).find(host.says), std::string::npos) << what << ": " << err.what();
        } catch (const HostStopped&) {
          EXPECT_TRUE(host.says && !*host.says) << what << ": the host's error";
        }
        EXPECT_GE(most, 2) << what << ": the call must split into tasks";
      }
      EXPECT_TRUE(world.inputs() == inputs) << world.name(s) << " " << maskattn::kernel_name(kernel) << ": an input or a cache was written";
    }
}

}  // namespace
