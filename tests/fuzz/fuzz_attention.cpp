// libFuzzer harness: bytes become attention problems, KV-cache sessions and merges (bounded sizes), run on
// every native target and kernel (Options::kernel = automatic, prefill, decode, decode_split) and
// checked against the float64 reference (maskattn/reference.hpp):
//   - valid input: the kernel's O, weights and lse match the reference within the tolerance
//     policy of docs/semantics.md "Numbers"; nothing outside the output views is written;
//   - hostile input (a valid problem with one mistake from a list of many, its parameter fuzzed):
//     the call throws maskattn::ArgumentError and writes nothing; whenever the reference rejects
//     a problem, attention() rejects it too; whenever attention() accepts one, it is right;
//   - KV caches (rings with sink tokens, paged): appends (ragged counts), truncates, resets, forks,
//     keeps of tree paths and attends (learned sinks, trees) against a shadow copy of what each
//     sequence holds; refused calls change nothing;
//   - merge_attention against its formula in double, including -inf and NaN lse and mismatches;
//   - on the bytes a case leaves: merges with no rows, quantized appends at float's limits.
// A finding aborts with a message (libFuzzer then saves the input). Build and run:
//   scripts/fuzz.sh [seconds]          (clang-19, -fsanitize=fuzzer,address,undefined)
#include <fuzzer/FuzzedDataProvider.h>
#include <sanitizer/common_interface_defs.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "maskattn/reference.hpp"
#include "../tensor.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::ConstTensor;
using maskattn::Kernel;
using maskattn::MutableTensor;
using maskattn::Options;
using maskattn::ReferenceResult;
using maskattn::Target;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 4242.0f;

float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::string g_case;  // the current case, printed with a finding

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\n*** maskattn fuzz finding: %s\n    case: %s\n", what.c_str(), g_case.c_str());
  std::fflush(stderr);
  std::abort();
}
#define FUZZ_CHECK(cond, msg) \
  do {                        \
    if (!(cond)) finding(std::string(#cond) + ": " + (msg)); \
  } while (0)

const std::vector<Target>& targets() {
  static const std::vector<Target> t = [] {
    std::vector<Target> v;
    for (Target x : maskattn::kKernelTargets)
      if (maskattn::target_available(x)) v.push_back(x);
    return v;
  }();
  return t;
}

// splitmix64: the data of a case comes from one fuzzed seed (fuzzing every float is slow and
// finds nothing more); special values go where the fuzzer says.
struct Gen {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * (1.0f / 16777216.0f); }
};

// Tensors (tests/tensor.hpp) are made with padding (NaN for inputs, a sentinel for outputs) around
// and between rows: reads or writes outside the view show up.
using maskattn_test::Tensor;

// layout 0: bhld, 1: blhd, 2: bhld with gaps (row, head, batch) and a misaligned start.
Tensor make(int layout, int64_t B, int64_t H, int64_t L, int64_t D, float pad) {
  Tensor t;
  t.shape[0] = B; t.shape[1] = H; t.shape[2] = L; t.shape[3] = D;
  int64_t total = 0;
  if (layout == 0) {
    t.strides[0] = H * L * D; t.strides[1] = L * D; t.strides[2] = D;
    total = B * H * L * D;
  } else if (layout == 1) {
    t.strides[0] = L * H * D; t.strides[1] = D; t.strides[2] = H * D;
    total = B * H * L * D;
  } else {
    const int64_t row = D + 3, head = L * row + 2, batch = H * head + 5;
    t.strides[0] = batch; t.strides[1] = head; t.strides[2] = row;
    t.offset = 1;
    total = B * batch;
  }
  t.buf.assign(size_t(t.offset + total + 2), pad);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Comparison: docs/semantics.md "Numbers". bound = max(2 x naive fp32 error over the tensor,
// floor), at most `cap` when inputs are unit-scale, and per element at least rel x |fp64|.
// ---------------------------------------------------------------------------------------------
void compare(const char* what, const std::vector<float>& got, const std::vector<double>& ref64,
             const std::vector<double>& ref32, double floor, double cap, double rel, bool nan_for_inf = false,
             double naive_factor = 2, double logit_rounding = 0) {
  FUZZ_CHECK(got.size() == ref64.size(), std::string(what) + ": size");
  double e32 = 0;
  for (size_t i = 0; i < ref64.size(); ++i)
    if (std::isfinite(ref64[i]) && std::isfinite(ref32[i])) e32 = std::max(e32, std::fabs(ref32[i] - ref64[i]));
  double bound = std::max({naive_factor * e32, floor, logit_rounding});
  if (cap > 0) bound = std::min(bound, cap);
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = ref64[i], g = got[i];
    char msg[256];
    std::snprintf(msg, sizeof msg, "%s[%zu]: kernel %.9g, fp64 reference %.9g, naive fp32 %.9g, bound %.3g", what, i,
                  g, e, ref32[i], bound);
    // Non-finite results are exact: NaN where the reference has NaN, the same infinity. A kernel
    // result that is non-finite where fp64 is not (or another non-finite value) passes only when
    // the naive fp32 implementation gives exactly that too (with data near the float limits, a
    // weight that underflows to 0 in fp32 meets an infinite V: 0 x inf = NaN in fp32, inf in fp64).
    const double n32 = ref32[i];
    const bool as_fp32 = !std::isfinite(g) && (std::isnan(g) ? std::isnan(n32) : g == n32);
    if (std::isnan(e)) {
      FUZZ_CHECK(std::isnan(g) || as_fp32, msg);
    } else if (std::isinf(e)) {
      FUZZ_CHECK(g == e || as_fp32 || (nan_for_inf && std::isnan(g)), msg);
    } else if (as_fp32) {
      continue;
    } else {
      FUZZ_CHECK(std::isfinite(g), msg);
      double b = std::max(bound, rel * std::fabs(e));
      if (cap > 0) b = std::min(b, cap);
      FUZZ_CHECK(std::fabs(g - e) <= b, msg);
    }
  }
}

// Keeps the fp32 result farthest from fp64 (the naive error over summation orders).
void keep_worst(std::vector<double>& worst, const std::vector<double>& other, const std::vector<double>& fp64) {
  for (size_t i = 0; i < worst.size(); ++i)
    if (std::isfinite(other[i]) && !(std::fabs(other[i] - fp64[i]) <= std::fabs(worst[i] - fp64[i]))) worst[i] = other[i];
}

// ---------------------------------------------------------------------------------------------
// One attention problem.
// ---------------------------------------------------------------------------------------------
struct Problem {
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0, Dv = 0;
  int layout = 0;
  Tensor q, k, v, out;
  std::vector<float> weights, lse;
  bool want_weights = false, want_lse = false;
  std::vector<int32_t> key_lengths, query_lengths, qseg, kseg;
  std::vector<uint8_t> allowed;
  std::vector<float> bias, slopes, sinks;
  std::vector<int32_t> tree;
  int64_t allowed_shape[4] = {1, 1, 1, 1}, bias_shape[4] = {1, 1, 1, 1};
  Options opt;
  maskattn::ExtraOutputs extra;
  bool unit_scale = true;  // inputs in [-1, 1], O(1) logits: the 1e-5 cap applies to O
  bool inf_in_qk = false;  // an infinity in q or k (see check_outputs)
  bool inf_in_v = false;   // an infinity in v (see check_outputs)

  void link() {  // views of the buffers into opt and extra
    opt.key_lengths = key_lengths.empty() ? maskattn::Span<int32_t>() : maskattn::Span<int32_t>(key_lengths);
    opt.query_lengths = query_lengths.empty() ? maskattn::Span<int32_t>() : maskattn::Span<int32_t>(query_lengths);
    opt.query_segments = qseg.empty() && kseg.empty() ? maskattn::Span<int32_t>() : maskattn::Span<int32_t>(qseg.data(), qseg.size());
    opt.key_segments = qseg.empty() && kseg.empty() ? maskattn::Span<int32_t>() : maskattn::Span<int32_t>(kseg.data(), kseg.size());
    if (!allowed.empty())
      opt.allowed = maskattn::make_mask<uint8_t>(allowed.data(), allowed_shape[0], allowed_shape[1], allowed_shape[2],
                                                 allowed_shape[3], int64_t(allowed.size()));
    if (!bias.empty())
      opt.bias = maskattn::make_mask<float>(bias.data(), bias_shape[0], bias_shape[1], bias_shape[2], bias_shape[3],
                                            int64_t(bias.size()));
    opt.alibi_slopes = slopes.empty() ? maskattn::Span<float>() : maskattn::Span<float>(slopes);
    opt.sinks = sinks.empty() ? maskattn::Span<float>() : maskattn::Span<float>(sinks);
    opt.tree = tree.empty() ? maskattn::Span<int32_t>() : maskattn::Span<int32_t>(tree);
    extra = {};
    if (want_weights) {
      extra.weights = weights.data();
      extra.weights_size = int64_t(weights.size());
    }
    if (want_lse) {
      extra.lse = lse.data();
      extra.lse_size = int64_t(lse.size());
    }
  }
};

float special(FuzzedDataProvider& in) {
  static const float values[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-30f, -3.0f, 17.0f};
  return values[in.ConsumeIntegralInRange<size_t>(0, sizeof values / sizeof values[0] - 1)];
}

Problem build_problem(FuzzedDataProvider& in) {
  Problem p;
  p.B = in.ConsumeIntegralInRange<int64_t>(0, 2);
  p.Hkv = in.ConsumeIntegralInRange<int64_t>(0, 3);
  p.Hq = p.Hkv * in.ConsumeIntegralInRange<int64_t>(1, 4);
  p.Lq = in.ConsumeIntegralInRange<int64_t>(0, 40);
  p.Lk = in.ConsumeIntegralInRange<int64_t>(0, 140);
  p.D = in.ConsumeIntegralInRange<int64_t>(0, 24);
  p.Dv = in.ConsumeIntegralInRange<int64_t>(0, 24);
  p.layout = in.ConsumeIntegralInRange<int>(0, 2);
  Gen g{in.ConsumeIntegral<uint64_t>()};
  const float amp = in.ConsumeBool() ? 1.0f : 6.0f;
  p.unit_scale = amp == 1.0f;
  p.q = make(p.layout, p.B, p.Hq, p.Lq, p.D, kNaN);
  p.k = make(p.layout, p.B, p.Hkv, p.Lk, p.D, kNaN);
  p.v = make(p.layout, p.B, p.Hkv, p.Lk, p.Dv, kNaN);
  p.out = make(p.layout, p.B, p.Hq, p.Lq, p.Dv, kSentinel);
  for (Tensor* t : {&p.q, &p.k, &p.v})
    for (int64_t b = 0; b < t->shape[0]; ++b)
      for (int64_t h = 0; h < t->shape[1]; ++h)
        for (int64_t l = 0; l < t->shape[2]; ++l)
          for (int64_t d = 0; d < t->shape[3]; ++d) t->buf[size_t(t->index(b, h, l, d))] = g.uniform(-amp, amp);
  // A few special values (NaN, infinities, zeros) where the fuzzer says.
  const int specials = in.ConsumeIntegralInRange<int>(0, 3);
  for (int s = 0; s < specials; ++s) {
    Tensor* t = in.PickValueInArray({&p.q, &p.k, &p.v});
    const int64_t n = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
    if (n == 0) continue;
    int64_t flat = in.ConsumeIntegralInRange<int64_t>(0, n - 1);
    const int64_t d = flat % t->shape[3], l = (flat /= t->shape[3]) % t->shape[2], h = (flat /= t->shape[2]) % t->shape[1];
    const int64_t b = flat / t->shape[1];
    const float x = special(in);
    t->buf[size_t(t->index(b, h, l, d))] = x;
    p.unit_scale = false;
    if (std::isinf(x)) (t == &p.v ? p.inf_in_v : p.inf_in_qk) = true;
  }

  Options& o = p.opt;
  o.causal = in.ConsumeBool();
  o.align = in.ConsumeBool() ? maskattn::Align::top_left : maskattn::Align::bottom_right;
  if (in.ConsumeBool())
    for (int64_t b = 0; b < p.B; ++b) p.key_lengths.push_back(in.ConsumeIntegralInRange<int32_t>(0, int32_t(p.Lk)));
  if (in.ConsumeBool())
    for (int64_t b = 0; b < p.B; ++b) p.query_lengths.push_back(in.ConsumeIntegralInRange<int32_t>(0, int32_t(p.Lq)));
  if (in.ConsumeBool()) {
    o.window.left = in.ConsumeIntegralInRange<int64_t>(-1, p.Lk + p.Lq);
    o.window.right = in.ConsumeIntegralInRange<int64_t>(-1, p.Lk + p.Lq);
  }
  if (in.ConsumeBool()) o.prefix = in.ConsumeIntegralInRange<int64_t>(0, p.Lk + 2);
  if (in.ConsumeBool()) {
    const int32_t ids = in.ConsumeIntegralInRange<int32_t>(1, 4);
    for (int64_t n = 0; n < p.B * p.Lq; ++n) p.qseg.push_back(int32_t(g.next() % uint64_t(ids)));
    for (int64_t n = 0; n < p.B * p.Lk; ++n) p.kseg.push_back(int32_t(g.next() % uint64_t(ids)));
  }
  const int64_t full[4] = {p.B, p.Hq, p.Lq, p.Lk};
  if (in.ConsumeBool()) {
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) n *= (p.allowed_shape[d] = in.ConsumeBool() ? full[d] : 1);
    const uint64_t keep = in.ConsumeIntegralInRange<uint64_t>(0, 16);
    for (int64_t i = 0; i < n; ++i) p.allowed.push_back(g.next() % 16 < keep ? 1 : 0);
    if (p.allowed.empty()) p.allowed.push_back(1);  // a 0-element mask still needs an address
  }
  if (in.ConsumeBool()) {
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) n *= (p.bias_shape[d] = in.ConsumeBool() ? full[d] : 1);
    const int kind = in.ConsumeIntegralInRange<int>(0, 3);
    static const float large[] = {-1e4f, -1e9f, -3.4e38f};
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t r = g.next() % 8;
      float x = g.uniform(-1, 1);
      if (r == 0) x = -kInf;
      else if (r == 1 && kind >= 1) x = large[g.next() % 3];
      else if (r == 2 && kind >= 2) x = g.uniform(-50, 50);
      else if (r == 3 && kind == 3) x = in.ConsumeBool() ? kNaN : kInf;
      p.bias.push_back(x);
    }
    if (kind > 0) p.unit_scale = false;
    if (p.bias.empty()) p.bias.push_back(0);
  }
  if (in.ConsumeBool()) {
    for (int64_t h = 0; h < p.Hq; ++h) p.slopes.push_back(g.uniform(0, 1));
    p.unit_scale = false;
  }
  if (in.ConsumeBool())  // learned sinks, some heads without one (-inf)
    for (int64_t h = 0; h < p.Hq; ++h) p.sinks.push_back(g.next() % 5 == 0 ? -kInf : g.uniform(-6, 6));
  int64_t min_key_length = p.Lk;
  for (int32_t x : p.key_lengths) min_key_length = std::min<int64_t>(min_key_length, x);
  if (in.ConsumeBool() && p.query_lengths.empty() && p.Lq <= min_key_length && p.Lq > 0) {
    // Tree verification: one tree for all sequences or one each, parents before children.
    const int64_t trees = in.ConsumeBool() ? p.B : 1;
    for (int64_t t = 0; t < trees; ++t)
      for (int64_t i = 0; i < p.Lq; ++i) p.tree.push_back(i == 0 || g.next() % 4 == 0 ? -1 : int32_t(g.next() % uint64_t(i)));
  }
  if (in.ConsumeBool()) {
    static const float caps[] = {0.5f, 1.0f, 5.0f, 30.0f, std::numeric_limits<float>::min()};
    o.softcap = in.PickValueInArray(caps);
  }
  if (in.ConsumeBool()) {
    static const float scales[] = {0.0f, -0.7f, 0.1f, 1.0f, 2.5f, 8.0f, 1e-20f};
    o.scale = in.PickValueInArray(scales);
    if (std::fabs(*o.scale) > 1.0f) p.unit_scale = false;
  }
  o.fully_masked = in.PickValueInArray({maskattn::FullyMasked::zero, maskattn::FullyMasked::nan, maskattn::FullyMasked::uniform});
  o.target = targets()[in.ConsumeIntegralInRange<size_t>(0, targets().size() - 1)];
  o.kernel = in.PickValueInArray({Kernel::automatic, Kernel::prefill, Kernel::decode, Kernel::decode_split});
  o.threads = in.ConsumeIntegralInRange<int>(1, 3);
  p.want_weights = in.ConsumeBool();
  p.want_lse = in.ConsumeBool();
  p.weights.assign(size_t(p.B * p.Hq * p.Lq * p.Lk + 3), kSentinel);
  p.lse.assign(size_t(p.B * p.Hq * p.Lq + 3), kSentinel);
  p.link();
  if (p.want_weights) p.extra.weights_size = p.B * p.Hq * p.Lq * p.Lk;
  if (p.want_lse) p.extra.lse_size = p.B * p.Hq * p.Lq;
  char text[512];
  std::snprintf(text, sizeof text,
                "B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld Dv=%lld layout=%d specials=%d causal=%d top_left=%d "
                "key_lengths=%zu query_lengths=%zu window=(%lld,%lld) prefix=%lld segments=%d allowed=%zu bias=%zu "
                "alibi=%zu softcap=%g scale=%g policy=%d target=%s kernel=%s threads=%d",
                (long long)p.B, (long long)p.Hq, (long long)p.Hkv, (long long)p.Lq, (long long)p.Lk, (long long)p.D,
                (long long)p.Dv, p.layout, specials, o.causal, o.align == maskattn::Align::top_left, p.key_lengths.size(),
                p.query_lengths.size(), (long long)o.window.left, (long long)o.window.right, (long long)o.prefix,
                !p.qseg.empty(), p.allowed.size(), p.bias.size(), p.slopes.size(), double(o.softcap),
                o.scale ? double(*o.scale) : -999.0, int(o.fully_masked), maskattn::target_name(o.target),
                maskattn::kernel_name(o.kernel), o.threads);
  g_case = text;
  if (std::getenv("MASKATTN_FUZZ_PRINT")) std::fprintf(stderr, "case: %s\n", text);  // replaying a finding
  return p;
}

// The reference in fp64, and the naive fp32 one over three orders of the D axis (worst kept).
struct References {
  ReferenceResult fp64, fp32;
};
References references(const Problem& p) {
  References r;
  Options o = p.opt;
  o.target = Target::reference;
  r.fp64 = maskattn::reference_attention(p.q.cview(), p.k.cview(), p.v.cview(), o, maskattn::Precision::fp64);
  r.fp32 = maskattn::reference_attention(p.q.cview(), p.k.cview(), p.v.cview(), o, maskattn::Precision::fp32);
  for (int order = 1; order <= 2 && p.D > 1; ++order) {
    Tensor q = make(0, p.B, p.Hq, p.Lq, p.D, 0), k = make(0, p.B, p.Hkv, p.Lk, p.D, 0);
    for (const auto& [src, dst] : {std::pair<const Tensor*, Tensor*>{&p.q, &q}, {&p.k, &k}})
      for (int64_t b = 0; b < src->shape[0]; ++b)
        for (int64_t h = 0; h < src->shape[1]; ++h)
          for (int64_t l = 0; l < src->shape[2]; ++l)
            for (int64_t d = 0; d < p.D; ++d) {
              const int64_t from = order == 1 ? p.D - 1 - d : (d * 7 + 3) % p.D;  // reversed; a stride-7 walk
              dst->buf[size_t(dst->index(b, h, l, d))] = src->buf[size_t(src->index(b, h, l, from))];
            }
    if (order == 2 && std::gcd<int64_t>(7, p.D) != 1) continue;  // not a permutation
    const ReferenceResult other = maskattn::reference_attention(q.cview(), k.cview(), p.v.cview(), o, maskattn::Precision::fp32);
    keep_worst(r.fp32.out, other.out, r.fp64.out);
    keep_worst(r.fp32.weights, other.weights, r.fp64.weights);
    keep_worst(r.fp32.lse, other.lse, r.fp64.lse);
  }
  return r;
}

// Largest finite |x| of a tensor's elements (0 if none).
double max_abs_finite(const Tensor& t) {
  double m = 0;
  for (float x : t.buf)
    if (std::isfinite(x) && !(x == kSentinel)) m = std::max(m, double(std::fabs(x)));
  return m;
}

// An upper estimate of the logits' magnitude: |scale| D max|q| max|k| (capped by the softcap),
// plus the largest |bias| below the fill values and the largest ALiBi term.
double logit_magnitude(const Problem& p) {
  const double scale = p.opt.scale ? std::fabs(double(*p.opt.scale)) : 1.0 / std::sqrt(double(std::max<int64_t>(p.D, 1)));
  double s = scale * double(p.D) * max_abs_finite(p.q) * max_abs_finite(p.k);
  if (p.opt.softcap > 0) s = std::min(s, double(p.opt.softcap));
  double bias = 0, slope = 0;
  for (float x : p.bias)  // the -1e4, -1e9, -3.4e38 fill values mask; they do not widen the bound
    if (std::fabs(x) < 1e4f) bias = std::max(bias, double(std::fabs(x)));
  for (float x : p.slopes)
    if (std::isfinite(x)) slope = std::max(slope, double(std::fabs(x)));
  return s + bias + slope * double(p.Lq + p.Lk);
}

// The kernel's outputs against the references, and nothing written outside the views.
void check_outputs(const Problem& p, References r) {
  // Known divergence (reported; not a memory issue): an attended pair whose logit is -inf because
  // q or k hold infinities. The kernel treats it like a masked pair in the weights (0) and the lse
  // (a row of only such logits: lse = log of an empty sum = -inf), while its O is NaN; the float64
  // reference, plain softmax with max subtraction, gives NaN weights (and lse) there. The contract
  // does not say which; until it does, with infinities in q or k accept the kernel's 0 weights and
  // -inf lse where the reference has NaN (O is compared as always).
  if (p.inf_in_qk) {
    for (size_t row = 0; p.want_lse && row < r.fp64.lse.size(); ++row)
      if (std::isnan(r.fp64.lse[row]) && p.lse[row] == -kInf) r.fp64.lse[row] = r.fp32.lse[row] = -kInf;
    for (size_t at = 0; p.want_weights && at < r.fp64.weights.size(); ++at)
      if (std::isnan(r.fp64.weights[at]) && p.weights[at] == 0.0f) r.fp64.weights[at] = r.fp32.weights[at] = 0.0;
  }
  const std::vector<float> out = p.out.dense();
  const std::vector<uint8_t> inside = p.out.addressed();
  for (size_t i = 0; i < p.out.buf.size(); ++i)
    FUZZ_CHECK(inside[i] || p.out.buf[i] == kSentinel, "out written outside its view at " + std::to_string(i));
  // Known divergence 2 (reported): the kernel's exp flushes weights below the smallest normal float
  // (e^-88) to 0, where the references keep a subnormal weight; times an infinite V that is NaN in
  // the kernel and +-inf in the references. With infinities in v, NaN is accepted for +-inf in O.
  // Known divergence 3 (reported): with logits spread over tens of units (scale 8, ALiBi, biases
  // of +-50), the kernel's exponentials (exp2 of (s - m) * log2(e), rounded in fp32) lose about
  // |s - m| x 2^-24 relative, up to ~4x the naive fp32 error (libm exp): for such "wide" problems
  // the bound is 4x the naive error; unit-scale problems keep the contract's 2x and 1e-5 cap.
  // Known divergence 4: with logits of magnitude S (scale 8 and inputs up to 6 give |s| in the
  // thousands), one rounding of a logit moves a weight by about S x 2^-24 relative, and the kernel's
  // summation order (SIMD lanes, FMA) rounds differently from the naive loop; on a tiny problem the
  // naive implementation's realised error can be several times below the kernel's by luck (found:
  // Lk=3, D=17, scale 8, 1.15e-5 vs 2.3e-6). For wide problems the bound also allows 4 roundings of
  // the largest logit times the largest |v| (a first-order forward error bound, far below what a
  // masking mistake changes).
  // The same first-order term for weights and lse (found: Lq = 31, Lk = 56, D = 17, scale 8, bias,
  // sse2 decode: a weight of 0.613 off by 1.86e-5 where the naive loop was off by 4e-6): a weight
  // moves by its own logit's rounding and the normaliser's, relative (rel = 8 roundings of S), and
  // lse by the logit's, absolute (4 roundings of S).
  const double factor = p.unit_scale ? 2 : 4;
  const double logit_error = p.unit_scale ? 0 : 4 * 0x1p-24 * logit_magnitude(p);
  compare("O", out, r.fp64.out, r.fp32.out, 2e-6, p.unit_scale ? 1e-5 : 0, 0, p.inf_in_v, factor,
          logit_error * max_abs_finite(p.v));
  const size_t nw = size_t(p.B * p.Hq * p.Lq * p.Lk), nl = size_t(p.B * p.Hq * p.Lq);
  if (p.want_weights)
    compare("weights", std::vector<float>(p.weights.begin(), p.weights.begin() + long(nw)), r.fp64.weights, r.fp32.weights,
            2e-6, 0, 2 * logit_error, false, factor);
  if (p.want_lse)
    compare("lse", std::vector<float>(p.lse.begin(), p.lse.begin() + long(nl)), r.fp64.lse, r.fp32.lse, 4e-6, 0, 1e-6,
            false, factor, logit_error);
  for (size_t i = p.want_weights ? nw : 0; i < p.weights.size(); ++i) FUZZ_CHECK(p.weights[i] == kSentinel, "weights written past its end");
  for (size_t i = p.want_lse ? nl : 0; i < p.lse.size(); ++i) FUZZ_CHECK(p.lse[i] == kSentinel, "lse written past its end");
}

bool untouched(const Problem& p) {
  for (float x : p.out.buf) if (!(x == kSentinel)) return false;
  for (float x : p.weights) if (!(x == kSentinel)) return false;
  for (float x : p.lse) if (!(x == kSentinel)) return false;
  return true;
}

// Small enough for the reference to visit every (b, h, i) (an accepted problem may be empty but
// have huge B or H after a mutation).
bool small(const ConstTensor& t) {
  return t.shape[0] <= 64 && t.shape[1] <= 64 && t.shape[2] <= 4096 && t.shape[3] <= 4096;
}

void attention_case(FuzzedDataProvider& in) {
  Problem p = build_problem(in);
  try {
    maskattn::attention(p.q.cview(), p.k.cview(), p.v.cview(), p.out.view(), p.opt, p.extra);
  } catch (const ArgumentError& e) {
    // The generator can combine valid pieces into an invalid whole (a tiny softcap with a large
    // scale): then nothing is written, and the reference, which validates the same, agrees.
    FUZZ_CHECK(untouched(p), std::string("a rejected call wrote its outputs: ") + e.what());
    bool ref_rejects = false;
    try {
      (void)references(p);
    } catch (const ArgumentError&) {
      ref_rejects = true;
    }
    FUZZ_CHECK(ref_rejects, std::string("attention() rejected what the reference accepts: ") + e.what());
    return;
  }
  check_outputs(p, references(p));
}

// ---------------------------------------------------------------------------------------------
// Hostile: a valid problem, one mistake. Sizes of every buffer are given, so a wrongly accepted
// view is still inside memory (the checks, not luck, decide).
// ---------------------------------------------------------------------------------------------
void hostile_case(FuzzedDataProvider& in) {
  Problem p = build_problem(in);
  const int mistake = in.ConsumeIntegralInRange<int>(0, 31);
  const int64_t x = in.ConsumeIntegral<int64_t>();
  const int dim = in.ConsumeIntegralInRange<int>(0, 3);
  ConstTensor q = p.q.cview(), k = p.k.cview(), v = p.v.cview();
  MutableTensor out = p.out.view();
  ConstTensor* inputs[3] = {&q, &k, &v};
  ConstTensor& t = *inputs[in.ConsumeIntegralInRange<int>(0, 2)];
  Options& o = p.opt;
  bool must_fail = true;  // the mistake always makes the problem invalid
  std::vector<int32_t> spare(size_t(std::max<int64_t>(p.B, 1) * 2), 0);
  switch (mistake) {
    case 0: t.shape[dim] = -1 - (x & 0xffff); break;                       // negative dimension
    case 1: t.shape[dim] = x; must_fail = false; break;                      // any dimension
    case 2: t.strides[dim] = x; must_fail = false; break;                    // any stride
    case 3: t.size = x % 4096; must_fail = false; break;                     // any size
    case 4: out.shape[dim] = x; must_fail = false; break;
    case 5: out.strides[dim] = x; must_fail = false; break;
    case 6: out.size = x % 4096; must_fail = false; break;
    case 7: t.data = nullptr; must_fail = t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3] > 0; break;
    case 8: o.window.left = -2 - (x & 0xffffff); break;
    case 9: o.window.right = x < -1 ? x : -2; break;
    case 10: o.prefix = x < 0 ? x : -1; break;
    case 11: o.softcap = float_from_bits(uint32_t(x)); must_fail = false; break;   // any float
    case 12: o.scale = float_from_bits(uint32_t(x)); must_fail = false; break;
    case 13: o.threads = int(x % 5000); must_fail = !(o.threads >= 1 && o.threads <= 1024); break;
    case 14: o.fully_masked = static_cast<maskattn::FullyMasked>(3 + (x & 0xff)); break;
    case 15: o.align = static_cast<maskattn::Align>(2 + (x & 0xff)); break;
    case 16: o.kernel = static_cast<Kernel>(4 + (x & 0xff)); break;
    case 17: o.target = static_cast<Target>(9 + (x & 0xff)); break;
    case 18:  // key lengths: wrong count or out of range
      o.key_lengths = maskattn::Span<int32_t>(spare.data(), size_t(x & 1 ? p.B + 1 : p.B));
      if (p.B > 0) spare[size_t(uint64_t(x >> 1) % uint64_t(p.B))] = int32_t(x >> 8) | int32_t(0x80000000u >> (x & 2));
      must_fail = false;
      break;
    case 19:
      o.query_lengths = maskattn::Span<int32_t>(spare.data(), size_t(x & 1 ? p.B + 1 : p.B));
      if (p.B > 0) spare[size_t(uint64_t(x >> 1) % uint64_t(p.B))] = int32_t(x >> 8);
      must_fail = false;
      break;
    case 20: o.allowed.shape[dim] = x; must_fail = false; break;
    case 21: o.allowed.strides[dim] = x; must_fail = false; break;
    case 22: o.bias.shape[dim] = x; must_fail = false; break;
    case 23: o.bias.size = x % 64; must_fail = false; break;
    case 24: o.query_segments = maskattn::Span<int32_t>(p.qseg.data(), size_t(x & 63)); must_fail = false; break;
    case 25: o.key_segments = maskattn::Span<int32_t>(p.kseg.data(), size_t(x & 255)); must_fail = false; break;
    case 26: o.alibi_slopes = maskattn::Span<float>(p.slopes.data(), size_t(x & 15)); must_fail = false; break;
    case 27: p.want_weights = true; p.extra.weights = p.weights.data(); p.extra.weights_size = x % 9000; must_fail = false; break;
    case 28: p.want_lse = true; p.extra.lse = p.lse.data(); p.extra.lse_size = x % 300; must_fail = false; break;
    case 29: t.shape[dim] = int64_t(1) << (31 + (x & 31)); must_fail = false; break;   // >= 2^31
    case 30: for (int d = 0; d < 4; ++d) t.shape[d] = int64_t(1) << (16 + (x >> (d * 4) & 15)); must_fail = false; break;
    default: if (!p.slopes.empty()) p.slopes[0] = in.ConsumeBool() ? kNaN : kInf; else must_fail = false; break;
  }
  // The reference shares the library's validation of q, k, v and the options: what it rejects,
  // attention() must reject (it is skipped where an accepted problem would be huge and empty).
  bool ref_rejects = false;
  if (small(q) && small(k) && small(v)) {
    try {
      Options ro = o;
      ro.target = Target::reference;
      (void)maskattn::reference_attention(q, k, v, ro);
    } catch (const ArgumentError&) {
      ref_rejects = true;
    }
  }
  try {
    maskattn::attention(q, k, v, out, o, p.extra);
  } catch (const ArgumentError& e) {
    FUZZ_CHECK(untouched(p), std::string("a rejected call wrote its outputs: ") + e.what());
    return;
  } catch (const std::bad_alloc&) {
    FUZZ_CHECK(untouched(p), "a call that ran out of memory wrote its outputs");
    return;
  } catch (const std::exception& e) {
    finding(std::string("not an ArgumentError: ") + e.what());
  }
  FUZZ_CHECK(!must_fail, "mistake " + std::to_string(mistake) + " was accepted");
  FUZZ_CHECK(!ref_rejects, "the reference rejects a problem attention() accepted (mistake " + std::to_string(mistake) + ")");
  // Accepted with the tensors as built (only an option changed): the answer must be right.
  const bool views_as_built = (mistake >= 8 && mistake <= 28) || mistake == 31;
  if (views_as_built) check_outputs(p, references(p));
}

// ---------------------------------------------------------------------------------------------
// KV cache sessions against a shadow copy of each sequence's positions.
// ---------------------------------------------------------------------------------------------
void cache_case(FuzzedDataProvider& in) {
  maskattn::KVCacheConfig c;
  c.batch = in.ConsumeIntegralInRange<int64_t>(1, 3);
  c.kv_heads = in.ConsumeIntegralInRange<int64_t>(1, 3);
  c.capacity = in.ConsumeIntegralInRange<int64_t>(1, 40);
  c.head_dim = in.ConsumeIntegralInRange<int64_t>(1, 16);
  c.value_dim = in.ConsumeIntegralInRange<int64_t>(1, 16);
  using maskattn::KVType;
  c.dtype = in.PickValueInArray({KVType::f32, KVType::f16, KVType::q8, KVType::q4});
  if (in.ConsumeBool()) c.value_dtype = in.PickValueInArray({KVType::f32, KVType::f16, KVType::q8, KVType::q4});
  if (in.ConsumeBool()) c.key_rotation = maskattn::KeyRotation::none;
  c.window = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(1, c.capacity) : 0;
  if (c.window) c.sink_tokens = in.ConsumeIntegralInRange<int64_t>(0, std::min<int64_t>(3, c.capacity - c.window));
  if (in.ConsumeBool()) c.page_size = in.ConsumeIntegralInRange<int64_t>(1, 12);
  const int64_t S = c.sink_tokens;
  maskattn::KVCache cache(c);
  const KVType kt = cache.config().key_dtype.value(), vt = cache.config().value_dtype.value();
  // Quantized sides are checked against the cache's own contents (read()), with queries q8 holds
  // exactly when the keys are quantized (docs/semantics.md: then the plain fp32 bound applies).
  const bool quantized = kt == KVType::q8 || kt == KVType::q4 || vt == KVType::q8 || vt == KVType::q4;
  // Rotated keys: the query is rotated before it is quantized, so no query is exact; O is then held
  // to the documented bound for quantizing Q instead (weights and lse are not compared).
  const bool rotated = cache.keys_rotated();
  const bool exact_queries = (kt == KVType::q8 || kt == KVType::q4) && !rotated;
  const int64_t B = c.batch, H = c.kv_heads, D = c.head_dim, Dv = c.value_dim;
  Gen g{in.ConsumeIntegral<uint64_t>()};
  // shadow[b][h]: K rows then V rows of every position sequence b holds, as the cache stores them.
  std::vector<std::vector<std::vector<float>>> sk(static_cast<size_t>(B), std::vector<std::vector<float>>(static_cast<size_t>(H)));
  std::vector<std::vector<std::vector<float>>> sv = sk;
  std::vector<int32_t> lengths(static_cast<size_t>(B), 0);
  auto stored_as = [&](KVType t, float x) { return t == KVType::f16 ? maskattn::half_to_float(maskattn::float_to_half(x)) : x; };
  const int ops = in.ConsumeIntegralInRange<int>(1, 8);
  for (int op = 0; op < ops && in.remaining_bytes() > 0; ++op) {
    const int kind = in.ConsumeIntegralInRange<int>(0, 7);
    if (kind == 6) {  // fork: valid onto an empty other sequence, else refused with nothing changed
      const int64_t src = in.ConsumeIntegralInRange<int64_t>(0, B), dst = in.ConsumeIntegralInRange<int64_t>(0, B);
      const bool ok = src < B && dst < B && src != dst && lengths[size_t(dst)] == 0;
      try {
        cache.fork(src, dst);
        FUZZ_CHECK(ok, "an invalid fork was accepted");
      } catch (const ArgumentError&) {
        FUZZ_CHECK(!ok, "a valid fork was refused");
        FUZZ_CHECK(cache.lengths() == lengths, "a refused fork changed the lengths");
        continue;
      }
      sk[size_t(dst)] = sk[size_t(src)];
      sv[size_t(dst)] = sv[size_t(src)];
      lengths[size_t(dst)] = lengths[size_t(src)];
      FUZZ_CHECK(cache.lengths() == lengths, "lengths after a fork");
      continue;
    }
    if (kind == 7) {  // keep: a tree over the newest T positions, a path (sometimes not a path)
      const int64_t b = in.ConsumeIntegralInRange<int64_t>(0, B - 1);
      const int64_t T = in.ConsumeIntegralInRange<int64_t>(1, 6);
      std::vector<int32_t> tree, path;
      for (int64_t i = 0; i < T; ++i) tree.push_back(i == 0 || g.next() % 3 == 0 ? -1 : int32_t(g.next() % uint64_t(i)));
      for (int32_t node = -1;;) {  // a root, then a child of each node, while there is one
        std::vector<int32_t> children;
        for (int64_t i = 0; i < T; ++i)
          if (tree[size_t(i)] == node) children.push_back(int32_t(i));
        if (children.empty() || !in.ConsumeBool()) break;
        node = children[size_t(g.next() % children.size())];
        path.push_back(node);
      }
      if (!path.empty() && in.ConsumeBool()) path.back() = int32_t(g.next() % uint64_t(T + 1));  // maybe no child
      // The tree must lie in the positions the window part holds, [start, length) (read()).
      bool ok = T <= lengths[size_t(b)] - cache.read(b).start;
      for (size_t k = 0; k < path.size(); ++k)
        ok = ok && path[k] < T && tree[size_t(path[k])] == (k == 0 ? -1 : path[k - 1]);
      try {
        cache.keep(b, tree, path);
        FUZZ_CHECK(ok, "an invalid keep was accepted");
      } catch (const ArgumentError& e) {
        FUZZ_CHECK(!ok, std::string("a valid keep was refused: ") + e.what());
        FUZZ_CHECK(cache.lengths() == lengths, "a refused keep changed the lengths");
        continue;
      }
      const int64_t base = lengths[size_t(b)] - T;
      for (int64_t h = 0; h < H; ++h) {
        auto& kr = sk[size_t(b)][size_t(h)];
        auto& vr = sv[size_t(b)][size_t(h)];
        for (size_t k = 0; k < path.size(); ++k) {
          std::copy_n(kr.begin() + (base + path[k]) * D, D, kr.begin() + (base + int64_t(k)) * D);
          std::copy_n(vr.begin() + (base + path[k]) * Dv, Dv, vr.begin() + (base + int64_t(k)) * Dv);
        }
        kr.resize(size_t((base + int64_t(path.size())) * D));
        vr.resize(size_t((base + int64_t(path.size())) * Dv));
      }
      lengths[size_t(b)] = int32_t(base + int64_t(path.size()));
      FUZZ_CHECK(cache.lengths() == lengths, "lengths after keep");
      continue;
    }
    if (kind <= 1) {  // append
      const int64_t T = in.ConsumeIntegralInRange<int64_t>(0, 10);
      std::vector<float> k(size_t(B * H * T * D)), v(size_t(B * H * T * Dv));
      for (float& x : k) x = g.uniform(-1, 1);
      for (float& x : v) x = g.uniform(-1, 1);
      std::vector<int32_t> counts;
      if (in.ConsumeBool())
        for (int64_t b = 0; b < B; ++b) counts.push_back(in.ConsumeIntegralInRange<int32_t>(0, int32_t(T)));
      bool fits = true;
      for (int64_t b = 0; b < B; ++b)
        if (!c.window && lengths[size_t(b)] + (counts.empty() ? T : counts[size_t(b)]) > c.capacity) fits = false;
      const std::vector<int32_t> before = cache.lengths();
      try {
        cache.append(maskattn::bhld<const float>(k.data(), B, H, T, D), maskattn::bhld<const float>(v.data(), B, H, T, Dv),
                     counts.empty() ? maskattn::Span<int32_t>() : maskattn::Span<int32_t>(counts));
        FUZZ_CHECK(fits, "an append past capacity was accepted");
      } catch (const ArgumentError& e) {
        FUZZ_CHECK(!fits, std::string("a valid append was refused: ") + e.what());
        FUZZ_CHECK(cache.lengths() == before, "a refused append changed the lengths");
        continue;
      }
      for (int64_t b = 0; b < B; ++b) {
        const int64_t n = counts.empty() ? T : counts[size_t(b)];
        for (int64_t h = 0; h < H; ++h)
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t d = 0; d < D; ++d) sk[size_t(b)][size_t(h)].push_back(stored_as(kt, k[size_t(((b * H + h) * T + t) * D + d)]));
            for (int64_t d = 0; d < Dv; ++d) sv[size_t(b)][size_t(h)].push_back(stored_as(vt, v[size_t(((b * H + h) * T + t) * Dv + d)]));
          }
        lengths[size_t(b)] += int32_t(n);
      }
      FUZZ_CHECK(cache.lengths() == lengths, "lengths after an append");
    } else if (kind == 2) {  // truncate
      std::vector<int32_t> next(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) next[size_t(b)] = in.ConsumeIntegralInRange<int32_t>(0, lengths[size_t(b)] + 1);
      bool ok = true;
      for (int64_t b = 0; b < B; ++b) ok = ok && next[size_t(b)] <= lengths[size_t(b)];
      try {
        cache.truncate(next);
        FUZZ_CHECK(ok, "truncate beyond a length was accepted");
      } catch (const ArgumentError&) {
        FUZZ_CHECK(!ok, "a valid truncate was refused");
        FUZZ_CHECK(cache.lengths() == lengths, "a refused truncate changed the lengths");
        continue;
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          sk[size_t(b)][size_t(h)].resize(size_t(next[size_t(b)] * D));
          sv[size_t(b)][size_t(h)].resize(size_t(next[size_t(b)] * Dv));
        }
      lengths = next;
    } else if (kind == 3) {  // reset
      cache.reset();
      for (int64_t b = 0; b < B; ++b) {
        lengths[size_t(b)] = 0;
        for (int64_t h = 0; h < H; ++h) sk[size_t(b)][size_t(h)].clear(), sv[size_t(b)][size_t(h)].clear();
      }
    } else {  // attend, compared with the reference on the shadow (a full cache: window [W-1, 0] for a ring)
      const int64_t Lq = in.ConsumeIntegralInRange<int64_t>(1, 4), Hq = H * in.ConsumeIntegralInRange<int64_t>(1, 3);
      const int64_t Lk = *std::max_element(lengths.begin(), lengths.end());
      Options o = maskattn::KVCache::default_options();
      o.causal = in.ConsumeBool();
      if (in.ConsumeBool()) o.window = {in.ConsumeIntegralInRange<int64_t>(-1, 12), in.ConsumeIntegralInRange<int64_t>(-1, 3)};
      if (in.ConsumeBool()) o.softcap = 5.0f;
      std::vector<float> sinks;
      if (in.ConsumeBool())
        for (int64_t h = 0; h < Hq; ++h) sinks.push_back(g.next() % 4 == 0 ? -kInf : g.uniform(-3, 3));
      if (!sinks.empty()) o.sinks = sinks;
      std::vector<int32_t> tree;
      if (in.ConsumeBool() && Lq <= *std::min_element(lengths.begin(), lengths.end()))
        for (int64_t i = 0; i < Lq; ++i) tree.push_back(i == 0 || g.next() % 3 == 0 ? -1 : int32_t(g.next() % uint64_t(i)));
      if (!tree.empty()) o.tree = tree;
      o.fully_masked = in.ConsumeBool() ? maskattn::FullyMasked::nan : maskattn::FullyMasked::zero;
      o.target = targets()[in.ConsumeIntegralInRange<size_t>(0, targets().size() - 1)];
      o.kernel = in.PickValueInArray({Kernel::automatic, Kernel::prefill, Kernel::decode, Kernel::decode_split});
      o.threads = in.ConsumeIntegralInRange<int>(1, 2);
      g_case = "cache B=" + std::to_string(B) + " Hkv=" + std::to_string(H) + " Hq=" + std::to_string(Hq) + " Lq=" +
               std::to_string(Lq) + " D=" + std::to_string(D) + " Dv=" + std::to_string(Dv) + " capacity=" +
               std::to_string(c.capacity) + " window=" + std::to_string(c.window) + " sink_tokens=" + std::to_string(S) +
               " page_size=" + std::to_string(c.page_size) + " sinks=" + std::to_string(sinks.size()) + " tree=" +
               std::to_string(tree.size()) + " K " + maskattn::kv_type_name(kt) +
               " V " + maskattn::kv_type_name(vt) + " target " + maskattn::target_name(o.target) + " kernel " +
               maskattn::kernel_name(o.kernel) + " causal " + std::to_string(o.causal) + " window option [" +
               std::to_string(o.window.left) + ", " + std::to_string(o.window.right) + "] softcap " +
               std::to_string(o.softcap) + " lengths";
      for (int32_t x : lengths) g_case += " " + std::to_string(x);
      std::vector<float> q(size_t(B * Hq * Lq * D)), outv(size_t(B * Hq * Lq * Dv), kSentinel), w(size_t(B * Hq * Lq * Lk), kSentinel),
          l(size_t(B * Hq * Lq), kSentinel);
      for (float& x : q) x = g.uniform(-1, 1);
      if (exact_queries)  // per block of 32: integers in [-127, 127] (127 among them) times 2^-6
        for (int64_t row = 0; row < B * Hq * Lq; ++row)
          for (int64_t b0 = 0; b0 < D; b0 += 32) {
            const int64_t len = std::min<int64_t>(32, D - b0);
            for (int64_t i = 0; i < len; ++i) q[size_t(row * D + b0 + i)] = std::round(g.uniform(-127, 127)) / 64.0f;
            q[size_t(row * D + b0)] = 127.0f / 64.0f;
          }
      maskattn::ExtraOutputs extra;
      extra.weights = w.data();
      extra.lse = l.data();
      try {
        cache.attend(maskattn::bhld<const float>(q.data(), B, Hq, Lq, D), maskattn::bhld(outv.data(), B, Hq, Lq, Dv), o, extra);
      } catch (const ArgumentError& e) {
        // Only a ring whose window reaches an overwritten position may refuse.
        FUZZ_CHECK(c.window > 0 && std::string(e.what()).find("overwritten") != std::string::npos,
                   std::string("a valid attend was refused: ") + e.what());
        for (float x : outv) FUZZ_CHECK(x == kSentinel, "a refused attend wrote its output");
        continue;
      }
      // The same problem on plain tensors: every position each sequence holds (quantized: what
      // read() returns, positions before `start` zero: a ring's window never reaches them).
      std::vector<float> kp(size_t(B * H * Lk * D), 0.0f), vp(size_t(B * H * Lk * Dv), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        if (quantized) {  // rows [0, sinks) are positions 0.., the rest start..
          const maskattn::KVCache::Contents got = cache.read(b);
          FUZZ_CHECK(got.start + got.length == lengths[size_t(b)], "read(): start + length is the sequence's length");
          const int64_t n = got.sinks + got.length;
          for (int64_t h = 0; h < H; ++h) {
            std::copy_n(got.key.begin() + h * n * D, got.sinks * D, kp.begin() + (b * H + h) * Lk * D);
            std::copy_n(got.value.begin() + h * n * Dv, got.sinks * Dv, vp.begin() + (b * H + h) * Lk * Dv);
            std::copy_n(got.key.begin() + (h * n + got.sinks) * D, got.length * D, kp.begin() + ((b * H + h) * Lk + got.start) * D);
            std::copy_n(got.value.begin() + (h * n + got.sinks) * Dv, got.length * Dv, vp.begin() + ((b * H + h) * Lk + got.start) * Dv);
          }
          continue;
        }
        for (int64_t h = 0; h < H; ++h) {
          std::copy(sk[size_t(b)][size_t(h)].begin(), sk[size_t(b)][size_t(h)].end(), kp.begin() + (b * H + h) * Lk * D);
          std::copy(sv[size_t(b)][size_t(h)].begin(), sv[size_t(b)][size_t(h)].end(), vp.begin() + (b * H + h) * Lk * Dv);
        }
      }
      Options ro = o;
      ro.target = Target::reference;
      ro.key_lengths = lengths;
      // A ring: j <= d(i), and j within the window (narrowed by the caller's) or a sink token (j < S).
      std::vector<uint8_t> ring_mask;
      if (c.window > 0) {
        const int64_t left = ro.window.left < 0 ? c.window - 1 : std::min(ro.window.left, c.window - 1);
        ring_mask.assign(size_t(B * Lq * Lk), 0);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < Lq; ++i) {
            const int64_t d = lengths[size_t(b)] - Lq + i;
            for (int64_t j = 0; j < Lk && j <= d; ++j) ring_mask[size_t((b * Lq + i) * Lk + j)] = j >= d - left || j < S;
          }
        ro.window = {-1, -1};
        ro.allowed = maskattn::make_mask<uint8_t>(ring_mask.data(), B, 1, Lq, Lk, int64_t(ring_mask.size()));
      }
      const auto qv = maskattn::bhld<const float>(q.data(), B, Hq, Lq, D);
      const auto kv = maskattn::bhld<const float>(kp.data(), B, H, Lk, D), vv = maskattn::bhld<const float>(vp.data(), B, H, Lk, Dv);
      const ReferenceResult r64 = maskattn::reference_attention(qv, kv, vv, ro, maskattn::Precision::fp64);
      const ReferenceResult r32 = maskattn::reference_attention(qv, kv, vv, ro, maskattn::Precision::fp32);
      if (rotated) {  // |O - O_ref| <= (e^(2δ) - 1) max|V| + fp32, δ by Cauchy-Schwarz (docs/semantics.md)
        double vmax = 0, kmax = 0, qmax = 0;
        for (float x : vp) vmax = std::max(vmax, std::fabs(double(x)));
        for (int64_t j = 0; j < B * H * Lk; ++j) {
          double s2 = 0;
          for (int64_t d = 0; d < D; ++d) s2 += double(kp[size_t(j * D + d)]) * kp[size_t(j * D + d)];
          kmax = std::max(kmax, std::sqrt(s2));
        }
        for (int64_t r = 0; r < B * Hq * Lq; ++r) {
          double s2 = 0;
          for (int64_t d = 0; d < D; ++d) s2 += double(q[size_t(r * D + d)]) * q[size_t(r * D + d)];
          qmax = std::max(qmax, std::sqrt(s2));
        }
        const double delta = qmax * kmax / 254.0;  // scale 1/sqrt(D) times sqrt(D)
        const double bound = (std::exp(2 * delta) - 1) * vmax + 1e-5;
        for (size_t n = 0; n < outv.size(); ++n) {
          if (std::isnan(r64.out[n])) FUZZ_CHECK(std::isnan(outv[n]), "cache O (rotated keys): NaN expected");
          else FUZZ_CHECK(std::fabs(double(outv[n]) - r64.out[n]) <= bound, "cache O (rotated keys) beyond the bound for quantizing Q");
        }
      } else {
        compare("cache O", outv, r64.out, r32.out, 2e-6, 1e-5, 0);
        compare("cache weights", w, r64.weights, r32.weights, 2e-6, 0, 0);
        compare("cache lse", l, r64.lse, r32.lse, 4e-6, 0, 1e-6);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// merge_attention against the formula, in double: parts with random outputs and lse (finite, -inf,
// sometimes NaN), and sometimes a part or out of another shape (an error; out untouched).
// ---------------------------------------------------------------------------------------------
void merge_case(FuzzedDataProvider& in) {
  const int64_t B = in.ConsumeIntegralInRange<int64_t>(0, 2), H = in.ConsumeIntegralInRange<int64_t>(1, 3);
  const int64_t L = in.ConsumeIntegralInRange<int64_t>(0, 4), Dv = in.ConsumeIntegralInRange<int64_t>(1, 9);
  const int n = in.ConsumeIntegralInRange<int>(1, 4);
  Gen g{in.ConsumeIntegral<uint64_t>()};
  const int64_t rows = B * H * L;
  std::vector<std::vector<float>> outs(static_cast<size_t>(n)), lses(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    for (int64_t x = 0; x < rows * Dv; ++x) outs[size_t(p)].push_back(g.uniform(-2, 2));
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t k = g.next() % 10;
      lses[size_t(p)].push_back(k == 0 ? -kInf : k == 1 && in.ConsumeBool() ? kNaN : g.uniform(-20, 20));
      if (k == 0 && in.ConsumeBool()) outs[size_t(p)][size_t(r * Dv)] = kNaN;  // ignored: it attended nothing
    }
  }
  const int bad = in.ConsumeIntegralInRange<int>(0, 5);  // 0: a part of another length, 1: out of another Dv
  std::vector<maskattn::AttentionPart> parts;
  for (int p = 0; p < n; ++p)
    parts.push_back({maskattn::bhld<const float>(outs[size_t(p)].data(), B, H, bad == 0 && p == n - 1 && n > 1 ? L + 1 : L, Dv),
                     lses[size_t(p)].data()});
  std::vector<float> out(size_t(rows * (Dv + 1)), kSentinel), lse(size_t(rows), kSentinel);
  const int64_t out_dv = bad == 1 ? Dv + 1 : Dv;
  const bool must_fail = (bad == 0 && n > 1) || bad == 1;
  g_case = "merge B=" + std::to_string(B) + " H=" + std::to_string(H) + " L=" + std::to_string(L) + " Dv=" +
           std::to_string(Dv) + " parts=" + std::to_string(n) + " bad=" + std::to_string(bad);
  try {
    maskattn::merge_attention(parts, maskattn::bhld(out.data(), B, H, L, out_dv), lse.data());
    FUZZ_CHECK(!must_fail, "a mismatched merge was accepted");
  } catch (const ArgumentError&) {
    FUZZ_CHECK(must_fail, "a valid merge was refused");
    for (float x : out) FUZZ_CHECK(x == kSentinel, "a refused merge wrote its output");
    for (float x : lse) FUZZ_CHECK(x == kSentinel, "a refused merge wrote lse");
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY;
    bool nan = false;
    for (int p = 0; p < n; ++p) {
      const double l = lses[size_t(p)][size_t(r)];
      nan = nan || std::isnan(l);
      if (l > m) m = l;
    }
    if (nan) {
      FUZZ_CHECK(std::isnan(lse[size_t(r)]), "merge: a NaN lse makes the row NaN");
      continue;
    }
    if (m == -INFINITY) {
      FUZZ_CHECK(lse[size_t(r)] == -kInf, "merge: a row no part attends has lse -inf");
      for (int64_t c = 0; c < Dv; ++c) FUZZ_CHECK(out[size_t(r * Dv + c)] == 0.0f, "merge: a row no part attends is 0");
      continue;
    }
    double sum = 0;
    for (int p = 0; p < n; ++p)
      if (lses[size_t(p)][size_t(r)] != -INFINITY) sum += std::exp(double(lses[size_t(p)][size_t(r)]) - m);
    FUZZ_CHECK(std::fabs(lse[size_t(r)] - (m + std::log(sum))) <= 1e-5 * (1 + std::fabs(m)), "merge lse");
    for (int64_t c = 0; c < Dv; ++c) {
      double o = 0;
      for (int p = 0; p < n; ++p) {
        const double l = lses[size_t(p)][size_t(r)];
        if (l != -INFINITY) o += std::exp(l - m) * outs[size_t(p)][size_t(r * Dv + c)];
      }
      FUZZ_CHECK(std::fabs(out[size_t(r * Dv + c)] - o / sum) <= 1e-5, "merge O");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The edges (issue 25), run on the bytes a case left over (so that the corpus's inputs keep their
// cases): merging parts with no rows (a zero dimension beside others up to 2^45) returns at once;
// quantized appends near float's limits (±FLT_MAX, just below it, subnormal, tiny normal, -0
// blocks) read back finite, within the documented bound where the block's scale is a normal float.
// ---------------------------------------------------------------------------------------------
void limits_case(FuzzedDataProvider& in) {
  Gen g{in.ConsumeIntegral<uint64_t>()};
  if (in.ConsumeBool()) {
    // Dimensions up to 2^45 whose product stays below 2^61 (a view's strides are products of them).
    int e[4], sum = 0;
    for (int& x : e) sum += (x = in.ConsumeIntegralInRange<int>(0, 45));
    for (int& x : e) {
      const int cut = std::min(x, std::max(0, sum - 60));
      x -= cut;
      sum -= cut;
    }
    int64_t dims[4];
    for (int d = 0; d < 4; ++d) dims[d] = int64_t(1) << e[d];
    dims[in.ConsumeIntegralInRange<int>(0, 2)] = 0;  // B, H or L: no rows
    if (in.ConsumeBool()) dims[3] = 0;
    g_case = "merge of no rows [" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " +
             std::to_string(dims[2]) + ", " + std::to_string(dims[3]) + "]";
    const auto part = maskattn::bhld<const float>(nullptr, dims[0], dims[1], dims[2], dims[3]);
    const std::vector<maskattn::AttentionPart> parts(size_t(in.ConsumeIntegralInRange<int>(1, 3)), {part, nullptr});
    maskattn::merge_attention(parts, maskattn::bhld<float>(nullptr, dims[0], dims[1], dims[2], dims[3]));  // -timeout catches a hang
    return;
  }
  using maskattn::KVType;
  maskattn::KVCacheConfig c;
  c.capacity = 2;
  c.head_dim = c.value_dim = in.ConsumeIntegralInRange<int64_t>(1, 80);
  c.dtype = in.PickValueInArray({KVType::q8, KVType::q4});
  c.key_rotation = in.PickValueInArray({maskattn::KeyRotation::automatic, maskattn::KeyRotation::none, maskattn::KeyRotation::hadamard});
  const int64_t D = c.head_dim;
  if (D % 2 == 1 && c.key_rotation == maskattn::KeyRotation::hadamard) c.key_rotation = maskattn::KeyRotation::none;
  std::vector<float> x(size_t(2 * D));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t b0 = 0; b0 < D; b0 += 32) {
      const int kind = in.ConsumeIntegralInRange<int>(0, 5);
      const float max = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::min();
      const float mag = kind == 0 ? max : kind == 1 ? max * g.uniform(0.5f, 1.0f) : kind == 2 ? std::numeric_limits<float>::denorm_min() * float(1 + g.next() % (1u << 23))
                        : kind == 3 ? tiny * g.uniform(1.0f, 1000.0f) : kind == 4 ? 0.0f : 2.0f;
      for (int64_t i = b0; i < std::min(D, b0 + 32); ++i) {
        const float v = mag * (i == b0 ? 1.0f : g.uniform(0.0f, 1.0f));
        x[size_t(r * D + i)] = kind == 4 ? -0.0f : g.next() % 2 ? -v : v;
      }
    }
  g_case = "quantized append at float's limits: D=" + std::to_string(D) + " dtype=" + std::to_string(int(c.dtype)) +
           " rotation=" + std::to_string(int(c.key_rotation));
  maskattn::KVCache cache(c);
  cache.append(maskattn::bhld<const float>(x.data(), 1, 1, 2, D), maskattn::bhld<const float>(x.data(), 1, 1, 2, D));
  const maskattn::KVCache::Contents got = cache.read(0);
  if (std::getenv("MASKATTN_FUZZ_PRINT"))
    for (size_t i = 0; i < x.size(); ++i) std::fprintf(stderr, "x[%zu] = %g: key %g, value %g\n", i, x[i], got.key[i], got.value[i]);
  // A rotated row fits in float when |R x| <= ||x||_1 / sqrt(n) does over each rotation block of n
  // (a quantization block holding one element that does not fit is stored as NaN whole, so the
  // condition is the row's).
  int64_t n = 1;
  while (n < 256 && D % (n * 2) == 0) n *= 2;
  for (int64_t r = 0; r < 2; ++r) {
    bool row_fits = true;
    for (int64_t n0 = 0; n0 < D; n0 += n) {
      double l1 = 0;
      for (int64_t j = n0; j < n0 + n; ++j) l1 += std::fabs(double(x[size_t(r * D + j)]));
      row_fits = row_fits && l1 / std::sqrt(double(n)) <= 0.5 * double(std::numeric_limits<float>::max());
    }
    for (int64_t i = 0; i < D; ++i) {
      const size_t at = size_t(r * D + i);
      const int64_t b0 = i / 32 * 32;
      double amax = 0;
      for (int64_t j = b0; j < std::min(D, b0 + 32); ++j) amax = std::max(amax, std::fabs(double(x[size_t(r * D + j)])));
      const double bound = (c.dtype == KVType::q8 ? amax / 254 : amax / 8) * (1 + 1e-5);
      const bool normal_scale = amax / 127 >= double(std::numeric_limits<float>::min());
      FUZZ_CHECK(std::isfinite(got.value[at]), "a finite value read back non-finite");
      if (normal_scale) FUZZ_CHECK(std::fabs(got.value[at] - double(x[at])) <= bound, "a value beyond the quantization bound");
      if (!cache.keys_rotated()) {
        FUZZ_CHECK(std::isfinite(got.key[at]), "a finite key read back non-finite");
        if (normal_scale) FUZZ_CHECK(std::fabs(got.key[at] - double(x[at])) <= bound, "a key beyond the quantization bound");
      } else if (row_fits) {
        FUZZ_CHECK(std::isfinite(got.key[at]), "a rotated key that fits in float read back non-finite");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A sanitizer report (ASan, UBSan) ends the run: say which case it was.
  __sanitizer_set_death_callback([] { std::fprintf(stderr, "\n    case: %s\n", g_case.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  g_case.clear();
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
    case 1: attention_case(in); break;
    case 2: hostile_case(in); break;
    case 3: cache_case(in); break;
    default: merge_case(in); break;
  }
  if (in.remaining_bytes() > 0) limits_case(in);
  return 0;
}
