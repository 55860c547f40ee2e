// One attention problem as the C++ suites build it (test_differential, test_conformance, the thread
// suites through thread_cases.hpp, and the fuzz harness): sizes, storage, every mask rule of
// Options (the case owns the buffers Options points into), deterministic inputs, a run through the
// kernel and a run through the float64 reference (maskattn/reference.hpp).
//
//   AttentionCase c;
//   c.dims(2, 4, 2, 33, 70, 16, 16).causal = true;
//   const CaseInputs in = c.make_inputs(rng);                  // any generator with uniform(lo, hi)
//   const CaseRun r = c.run_kernel(in, c.options(target, kernel));
//   const CaseReferences ref = c.run_reference(in, {DOrder::reversed});
//
// The runs throw what attention() and reference_attention() throw: the GoogleTest suites turn that
// into a failure (test_support.hpp); the fuzz harness checks that a rejection is right. No GoogleTest here (the fuzz
// harness includes this header).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "maskattn/reference.hpp"
#include "tensor.hpp"

namespace maskattn_test {

// The targets whose decode kernel runs P·V over q8/q4 values in integers (int16 weights per tile:
// integer_pv_rounding in test_support.hpp): the int_pv column of the target table (each kernel's
// translation unit checks the column against its integer dot products).
inline bool integer_pv_target(maskattn::Target t) {
#define MASKATTN_TARGET(name, lanes, preference, family, arch, int_dot, cpu_check, simd, decode_rows, int_pv, ...) \
  if (t == maskattn::Target::name) return int_pv;
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET
  return false;
}

inline constexpr float kOutputSentinel = -777.25f;  // fills output buffers: anything the kernel must not touch
inline constexpr int64_t kCanary = 5;               // extra sentinel elements after the weights / lse buffers

// A dense mask (Options::allowed or Options::bias) the case owns: data, shape and strides, size-1
// dimensions broadcast (stride 0).
template <class T>
struct MaskBuffer {
  std::vector<T> data;
  std::array<int64_t, 4> shape{1, 1, 1, 1};
  std::array<int64_t, 4> strides{0, 0, 0, 0};

  // A contiguous mask of `shape`, every element `fill` (one element when the shape is empty: a
  // mask with no elements still needs an address).
  static MaskBuffer dense(std::array<int64_t, 4> shape, T fill) {
    MaskBuffer m;
    m.shape = shape;
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      m.strides[d] = shape[d] == 1 ? 0 : stride;
      stride *= shape[d];
    }
    m.data.assign(static_cast<size_t>(std::max<int64_t>(stride, 1)), fill);
    return m;
  }
  bool present() const { return !data.empty(); }
  maskattn::MaskView<T> view() const {
    maskattn::MaskView<T> m;
    if (!present()) return m;
    m.data = data.data();
    for (int i = 0; i < 4; ++i) {
      m.shape[i] = shape[i];
      m.strides[i] = strides[i];
    }
    m.size = static_cast<int64_t>(data.size());
    return m;
  }
  T& at(int64_t b, int64_t h, int64_t i, int64_t j) {
    return data[static_cast<size_t>(b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3])];
  }
};

struct CaseInputs {
  Tensor q, k, v;
};

// The buffers one kernel run writes: O in the case's output storage (padding kOutputSentinel), and
// weights / lse (when the case asks for them) with kCanary trailing sentinels.
struct CaseRun {
  Tensor out;
  std::vector<float> weights, lse;
  int64_t weights_count = 0, lse_count = 0;  // elements before the canaries
  bool ok = false;                           // attention() returned

  // What attention() is given: the buffers present, each with its size.
  maskattn::ExtraOutputs extra() {
    maskattn::ExtraOutputs x;
    if (!weights.empty()) {
      x.weights = weights.data();
      x.weights_size = weights_count;
    }
    if (!lse.empty()) {
      x.lse = lse.data();
      x.lse_size = lse_count;
    }
    return x;
  }
  // The results without the canaries.
  std::vector<float> weight_values() const { return head(weights, weights_count); }
  std::vector<float> lse_values() const { return head(lse, lse_count); }

 private:
  static std::vector<float> head(const std::vector<float>& v, int64_t n) {
    if (v.empty()) return {};
    return std::vector<float>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  }
};

struct CaseReferences {
  maskattn::ReferenceResult fp64, fp32;  // fp32: per element the worst over the orders sampled
  bool ok = false;                       // reference_attention() returned
};

// Orders of the D axis in which "naive fp32" is also summed, besides the natural one: a naive loop
// fixes no order, so its error is taken as the worst of a few (each suite keeps its sample).
enum class DOrder {
  reversed,
  shuffled,  // a fixed Fisher-Yates shuffle
  stride7,   // d -> (7 d + 3) mod D, where that is a permutation (gcd(7, D) = 1)
};

// The order as a permutation of 0..D-1, or empty where it is not one.
inline std::vector<int64_t> d_order(DOrder order, int64_t D) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(D, 0)));
  std::iota(p.begin(), p.end(), int64_t(0));
  switch (order) {
    case DOrder::reversed:
      for (int64_t d = 0; d < D; ++d) p[size_t(d)] = D - 1 - d;
      break;
    case DOrder::shuffled: {
      uint64_t state = 0x2545F4914F6CDD1DULL;
      for (int64_t d = D - 1; d > 0; --d) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        std::swap(p[size_t(d)], p[size_t((state >> 33) % static_cast<uint64_t>(d + 1))]);
      }
      break;
    }
    case DOrder::stride7:
      if (std::gcd<int64_t>(7, D) != 1) return {};
      for (int64_t d = 0; d < D; ++d) p[size_t(d)] = (d * 7 + 3) % D;
      break;
  }
  return p;
}

// A contiguous bhld copy of `t` with the D axis permuted: Q·Kᵀ is unchanged when Q and K get the
// same permutation, but a naive loop then sums the products in another order.
inline Tensor permute_d(const Tensor& t, const std::vector<int64_t>& perm) {
  Tensor p = make_tensor(Storage::bhld, t.shape[0], t.shape[1], t.shape[2], t.shape[3], 0.0f);
  for (int64_t b = 0; b < t.shape[0]; ++b)
    for (int64_t h = 0; h < t.shape[1]; ++h)
      for (int64_t l = 0; l < t.shape[2]; ++l)
        for (int64_t d = 0; d < t.shape[3]; ++d) p.at(b, h, l, d) = t.at(b, h, l, perm[size_t(d)]);
  return p;
}

// The tests' own RoPE (a third implementation, for the naive fp32 runs): a bhld copy of t with row l
// at position first + l + offset, rotated in double and rounded to float once, as the kernels are
// given it.
inline Tensor rope_tensor(const Tensor& t, const maskattn::Rope& r, int64_t first) {
  Tensor out = make_tensor(Storage::bhld, t.shape[0], t.shape[1], t.shape[2], t.shape[3], 0.0f);
  const int64_t D = t.shape[3], dims = r.dims ? r.dims : D, half = dims / 2;
  const bool inter = r.layout == maskattn::RopeLayout::interleaved;
  for (int64_t b = 0; b < t.shape[0]; ++b)
    for (int64_t h = 0; h < t.shape[1]; ++h)
      for (int64_t l = 0; l < t.shape[2]; ++l) {
        for (int64_t d = 0; d < D; ++d) out.at(b, h, l, d) = t.at(b, h, l, d);
        for (int64_t i = 0; i < half; ++i) {
          const int64_t xi = inter ? 2 * i : i, yi = inter ? 2 * i + 1 : i + half;
          const double a = double(first + l + r.offset) / std::pow(r.theta, double(2 * i) / double(dims));
          const double x = t.at(b, h, l, xi), y = t.at(b, h, l, yi);
          out.at(b, h, l, xi) = float(x * std::cos(a) - y * std::sin(a));
          out.at(b, h, l, yi) = float(x * std::sin(a) + y * std::cos(a));
        }
      }
  return out;
}

// Keeps, element by element, whichever fp32 result is farther from the fp64 one.
inline void keep_worst(std::vector<double>& worst, const std::vector<double>& other, const std::vector<double>& fp64) {
  for (size_t i = 0; i < worst.size() && i < other.size(); ++i)
    if (std::isfinite(other[i]) && !(std::fabs(other[i] - fp64[i]) <= std::fabs(worst[i] - fp64[i])))
      worst[i] = other[i];
}

struct AttentionCase {
  int64_t B = 1, Hq = 1, Hkv = 1, Lq = 8, Lk = 8, D = 16, Dv = 16;
  Storage q_storage = Storage::bhld, k_storage = Storage::bhld, v_storage = Storage::bhld,
          o_storage = Storage::bhld;
  float lo = -1.0f, hi = 1.0f;  // random Q/K/V values

  // The mask rules and options (Options points into these vectors).
  std::optional<float> scale;
  bool causal = false;
  maskattn::Align align = maskattn::Align::bottom_right;
  maskattn::Window window;
  int64_t prefix = 0;
  float softcap = 0;
  maskattn::FullyMasked policy = maskattn::FullyMasked::zero;
  std::vector<int32_t> key_lengths, query_lengths, query_segments, key_segments;
  std::vector<float> alibi;     // per-head slopes
  std::vector<float> sinks;     // learned per-head sinks ([Hq], -inf = none)
  std::vector<int32_t> tree;    // tree verification parents ([Lq] or [B, Lq])
  std::optional<maskattn::Rope> rope;
  MaskBuffer<float> bias;
  MaskBuffer<uint8_t> allowed;
  bool want_weights = true, want_lse = true;
  int threads = 1;

  // Tolerance (test_support.hpp): unit_scale (inputs in [-1, 1], O(1) logits) keeps the 1e-5
  // absolute cap on O. floor is the absolute error floor; the default is a few fp32 ulps of an O(1)
  // value. Rows with large logits raise it to what rounding the logits costs: near-tied keys turn
  // a logit error of ulp(|s|) into a weight error of about ulp(|s|) / 4, and on a handful of rows
  // the largest such error of two fp32 implementations can differ by far more than 2x (measured:
  // up to 18x between avx2 with FMA and the naive loop).
  bool unit_scale = true;
  double floor = 2e-6;

  AttentionCase& dims(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, int64_t dv) {
    B = b; Hq = hq; Hkv = hkv; Lq = lq; Lk = lk; D = d; Dv = dv;
    return *this;
  }
  AttentionCase& storage(Storage all) {
    q_storage = k_storage = v_storage = o_storage = all;
    return *this;
  }
  // A bias / allowed mask of the full [B, Hq, Lq, Lk] shape, every element `fill`.
  MaskBuffer<float>& full_bias(float fill = 0.0f) {
    bias = MaskBuffer<float>::dense({B, Hq, Lq, Lk}, fill);
    return bias;
  }
  MaskBuffer<uint8_t>& full_allowed(uint8_t fill = 1) {
    allowed = MaskBuffer<uint8_t>::dense({B, Hq, Lq, Lk}, fill);
    return allowed;
  }

  maskattn::Options options(maskattn::Target target, maskattn::Kernel kernel = maskattn::Kernel::automatic) const {
    maskattn::Options o;
    o.scale = scale;
    o.causal = causal;
    o.align = align;
    if (!key_lengths.empty()) o.key_lengths = key_lengths;
    if (!query_lengths.empty()) o.query_lengths = query_lengths;
    o.allowed = allowed.view();
    o.bias = bias.view();
    o.window = window;
    o.prefix = prefix;
    if (!query_segments.empty()) o.query_segments = query_segments;
    if (!key_segments.empty()) o.key_segments = key_segments;
    if (!alibi.empty()) o.alibi_slopes = alibi;
    if (!sinks.empty()) o.sinks = sinks;
    if (!tree.empty()) o.tree = tree;
    o.rope = rope;
    o.softcap = softcap;
    o.fully_masked = policy;
    o.target = target;
    o.kernel = kernel;
    o.threads = threads;
    return o;
  }

  // Q, K and V uniform in [lo, hi), each from its own generator, padding NaN (a read outside a view
  // shows up). In qkv_packed storage Q, K and V take slots 0, 1 and 2.
  template <class Gen>
  CaseInputs make_inputs(Gen& gq, Gen& gk, Gen& gv) const {
    const float pad = std::numeric_limits<float>::quiet_NaN();
    CaseInputs in;
    in.q = make_tensor(q_storage, B, Hq, Lq, D, pad, 0);
    fill_uniform(in.q, gq, lo, hi);
    in.k = make_tensor(k_storage, B, Hkv, Lk, D, pad, 1);
    fill_uniform(in.k, gk, lo, hi);
    in.v = make_tensor(v_storage, B, Hkv, Lk, Dv, pad, 2);
    fill_uniform(in.v, gv, lo, hi);
    return in;
  }
  // Q, then K, then V from one generator.
  template <class Gen>
  CaseInputs make_inputs(Gen& gen) const {
    return make_inputs(gen, gen, gen);
  }

  // Output buffers full of sentinels, weights and lse only where asked for.
  CaseRun new_outputs() const {
    CaseRun r;
    r.out = make_tensor(o_storage, B, Hq, Lq, Dv, kOutputSentinel);
    r.weights_count = B * Hq * Lq * Lk;
    r.lse_count = B * Hq * Lq;
    if (want_weights) r.weights.assign(static_cast<size_t>(r.weights_count + kCanary), kOutputSentinel);
    if (want_lse) r.lse.assign(static_cast<size_t>(r.lse_count + kCanary), kOutputSentinel);
    return r;
  }
  // attention() on `in` with options `o` (from options(), with whatever the caller adds: stats, an
  // executor) into r; r.ok once it returns. Throws what attention() throws.
  void run_kernel(const CaseInputs& in, const maskattn::Options& o, CaseRun& r) const {
    maskattn::attention(in.q.cview(), in.k.cview(), in.v.cview(), r.out.view(), o, r.extra());
    r.ok = true;
  }
  CaseRun run_kernel(const CaseInputs& in, const maskattn::Options& o) const {
    CaseRun r = new_outputs();
    run_kernel(in, o, r);
    return r;
  }

  // The float64 reference and the naive fp32 one (natural order over D, then each of `orders`,
  // the worst kept) under options `o` (default: options(Target::reference)). With RoPE the fp32
  // runs take Q and K rotated by rope_tensor (permuting D would move the pairs); the fp64
  // reference rotates them itself. Throws what reference_attention() throws.
  CaseReferences run_reference(const CaseInputs& in, std::initializer_list<DOrder> orders) const {
    return run_reference(in, orders, options(maskattn::Target::reference));
  }
  CaseReferences run_reference(const CaseInputs& in, std::initializer_list<DOrder> orders,
                               const maskattn::Options& o) const {
    CaseReferences r;
    r.fp64 = maskattn::reference_attention(in.q.cview(), in.k.cview(), in.v.cview(), o, maskattn::Precision::fp64);
    maskattn::Options o32 = o;
    const Tensor* q32 = &in.q;
    const Tensor* k32 = &in.k;
    Tensor q_rot, k_rot;
    if (rope) {
      q_rot = rope_tensor(in.q, *rope, Lk - Lq);
      k_rot = rope_tensor(in.k, *rope, 0);
      q32 = &q_rot;
      k32 = &k_rot;
      o32.rope.reset();
    }
    r.fp32 = maskattn::reference_attention(q32->cview(), k32->cview(), in.v.cview(), o32, maskattn::Precision::fp32);
    // With D <= 1 every order is the natural one.
    for (DOrder order : orders) {
      const std::vector<int64_t> perm = d_order(order, D);
      if (D <= 1 || perm.empty()) continue;
      const Tensor q = permute_d(*q32, perm), k = permute_d(*k32, perm);
      const maskattn::ReferenceResult other =
          maskattn::reference_attention(q.cview(), k.cview(), in.v.cview(), o32, maskattn::Precision::fp32);
      keep_worst(r.fp32.out, other.out, r.fp64.out);
      keep_worst(r.fp32.weights, other.weights, r.fp64.weights);
      keep_worst(r.fp32.lse, other.lse, r.fp64.lse);
    }
    r.ok = true;
    return r;
  }
};

}  // namespace maskattn_test
