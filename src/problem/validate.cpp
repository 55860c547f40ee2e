// Argument validation of a call (attention(), a cache's attend(), merge_attention(), the mask
// builders): the boundary where user input is checked once, with messages that name the argument,
// so the kernels' inner loops only assume. make_problem checks the options group by group
// (check_shape, check_output, check_scale, check_masks, check_segments, check_head_rules,
// check_softcap, check_rope_rules, check_run_settings, check_extra_outputs, check_scratch), each
// returning its part of Problem. Beside it: validate_rope.cpp (a Rope's fields, check_rope) and
// validate_cache.cpp (a KV cache's configuration and its methods' arguments).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "base/errors.hpp"
#include "problem/problem.hpp"
#include "problem/rope.hpp"
#include "problem/row_keys.hpp"
#include "maskattn/masks.hpp"

namespace maskattn::detail {
namespace {

// a * b elements of `bytes` each, or fail naming `argument` when their byte count would exceed
// kMaxBytes (problem.hpp: the one limit, also published to JavaScript).
int64_t checked_mul(int64_t a, int64_t b, const std::string& argument, int64_t bytes = sizeof(float)) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxBytes / bytes)
    fail(argument, cat("size overflows: ", a, " x ", b, " elements do not fit in memory (at most ", kMaxBytes,
                       " bytes per buffer)"));
  return r;
}
int64_t checked_add(int64_t a, int64_t b, const std::string& argument, int64_t bytes = sizeof(float)) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxBytes / bytes)
    fail(argument, cat("size overflows: offset ", a, " + ", b, " does not fit in memory (at most ", kMaxBytes,
                       " bytes per buffer)"));
  return r;
}

// Number of elements spanned by a view: 1 + largest offset it addresses (0 if it is empty).
int64_t span_of(const int64_t* shape, const int64_t* strides, const std::string& argument, int64_t bytes) {
  int64_t last = 0;
  for (int d = 0; d < 4; ++d) {
    if (shape[d] == 0) return 0;
    last = checked_add(last, checked_mul(shape[d] - 1, strides[d], argument, bytes), argument, bytes);
  }
  return last + 1;
}

const char* const kDimNames[4] = {"B", "H", "L", "D"};

template <class T>
void check_tensor(const TensorView<T>& t, const std::string& name) {
  for (int d = 0; d < 4; ++d)
    if (t.shape[d] < 0)
      fail(name, cat("shape[", d, "] (", kDimNames[d], ") must be >= 0, given ", t.shape[d]));
  for (int d = 0; d < 4; ++d)
    if (t.strides[d] < 0)
      fail(name, cat("strides[", d, "] must be >= 0, given ", t.strides[d]));
  if (t.size < -1) fail(name, cat("size must be >= 0, or -1 for unknown, given ", t.size));
  if (t.shape[3] > 1 && t.strides[3] != 1)
    fail(name, cat("innermost (D) stride must be 1, given ", t.strides[3]));
  // Element count without strides first, so absurd shapes fail as overflow, not as a stride issue.
  constexpr int64_t bytes = sizeof(T);
  int64_t count = 1;
  const bool empty = t.shape[0] == 0 || t.shape[1] == 0 || t.shape[2] == 0 || t.shape[3] == 0;
  if (empty) count = 0;  // an empty tensor never overflows, whatever its other dimensions
  else for (int d = 0; d < 4; ++d) count = checked_mul(count, t.shape[d], name, bytes);
  const int64_t span = span_of(t.shape, t.strides, name, bytes);
  if (count > 0 && t.data == nullptr) fail(name, cat("data is null but the shape has ", count, " elements"));
  if (t.size >= 0 && span > t.size)
    fail(name, cat("buffer too small: the view addresses ", span, " elements, size is ", t.size));
}

// The row strides (B, H, L) the kernels address a view by. A view with no elements addresses
// nothing, and its data may be null: its strides are taken as 0, so no kernel, whatever it
// computes from them, offsets a null base (found by tests/fuzz twice: a decode kernel's K and Q
// rows with D = 0 in padded storage).
template <class T>
RowMajor3 row_strides(const TensorView<T>& t) {
  for (int d = 0; d < 4; ++d)
    if (t.shape[d] == 0) return {0, 0, 0};
  return {t.strides[0], t.strides[1], t.strides[2]};
}

}  // namespace

void check_view(const ConstTensor& t, const std::string& name) { check_tensor(t, name); }
void check_view(const HalfTensor& t, const std::string& name) { check_tensor(t, name); }
int64_t checked_elements(std::initializer_list<int64_t> dims, int64_t element_bytes, const std::string& name) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxBytes / element_bytes)
      fail(name, cat("size overflows: the buffer would need more than ", kMaxBytes, " bytes"));
  return n;
}

namespace {

// An output view must not write two elements to one address (a race with threads, and the
// result would depend on write order). Dimensions sorted by stride must each step past the
// extent of all smaller ones.
void check_no_overlap(const MutableTensor& t, const std::string& name) {
  int order[4] = {0, 1, 2, 3};
  std::sort(order, order + 4, [&](int a, int b) { return t.strides[a] < t.strides[b]; });
  int64_t extent = 0;  // largest offset reachable by the dimensions seen so far
  for (int n = 0; n < 4; ++n) {
    const int d = order[n];
    if (t.shape[d] <= 1) continue;
    if (t.strides[d] <= extent)
      fail(name, cat("elements overlap: strides[", d, "] = ", t.strides[d], " must be > ", extent,
                     " so that the output rows do not share memory"));
    extent += (t.shape[d] - 1) * t.strides[d];
  }
}

void expect_dim(const std::string& name, const char* what, int64_t expected, int64_t given,
                const char* expected_from) {
  if (expected != given)
    fail(name, cat(what, " must be ", expected, " (", expected_from, "), given ", given));
}

template <class T>
MaskView<T> check_mask(const MaskView<T>& m, const std::string& name, const int64_t full[4]) {
  MaskView<T> out = m;
  if (!m.data) return out;
  if (m.size < -1) fail(name, cat("size must be >= 0, or -1 for unknown, given ", m.size));
  static const char* const dims[4] = {"B", "Hq", "Lq", "Lk"};
  for (int d = 0; d < 4; ++d) {
    if (m.shape[d] != 1 && m.shape[d] != full[d])
      fail(name, cat("shape[", d, "] cannot broadcast to ", dims[d], " = ", full[d], ": given ",
                     m.shape[d], " (expected 1 or ", full[d], ")"));
    if (m.strides[d] < 0) fail(name, cat("strides[", d, "] must be >= 0, given ", m.strides[d]));
    if (m.shape[d] == 1) out.strides[d] = 0;  // a size-1 dimension broadcasts whatever its stride
  }
  if (out.strides[3] != 0 && out.strides[3] != 1)
    fail(name, cat("the Lk stride must be 0 (broadcast) or 1, given ", out.strides[3]));
  const int64_t span = span_of(m.shape, out.strides, name, sizeof(T));
  if (m.size >= 0 && span > m.size)
    fail(name, cat("buffer too small: the mask addresses ", span, " elements, size is ", m.size));
  return out;
}

template <class T>
void check_span(const Span<T>& s, const std::string& name) {
  if (s.data == nullptr && s.size > 0) fail(name, cat("data is null but size is ", s.size));
}

const int32_t* check_per_batch(const Span<int32_t>& s, const std::string& name, int64_t B,
                               int64_t limit, const char* limit_name) {
  check_span(s, name);
  if (s.empty()) return nullptr;
  if (int64_t(s.size) != B) fail(name, cat("needs one entry per batch: expected ", B, ", given ", s.size));
  for (int64_t b = 0; b < B; ++b)
    if (s[b] < 0 || s[b] > limit)
      fail(cat(name, "[", b, "]"),
           cat("must be in [0, ", limit_name, " = ", limit, "], given ", s[b]));
  return s.data;
}

// Tree verification: parents in topological order (each parent before its child), one tree for
// every sequence or one per sequence; its nodes are the last Lq keys, which every sequence must have.
// Numbers the nodes in pre-order so that "t is an ancestor of i" is two comparisons in the kernels.
void check_tree(const Span<int32_t>& tree, const Problem& p, HeadRules& r) {
  const int64_t n = int64_t(tree.size);
  if (n != p.Lq && n != p.B * p.Lq)
    fail("tree", cat("needs one parent index per query (Lq = ", p.Lq, ") or per query of every sequence (B*Lq = ",
                     p.B * p.Lq, "), given ", n));
  if (p.query_lengths)
    fail("tree", "cannot be combined with query_lengths: the tree's nodes are the last Lq keys of each sequence");
  for (int64_t b = 0; b < p.B; ++b)
    if (p.key_length(b) < p.Lq)
      fail("tree", cat("its Lq = ", p.Lq, " nodes are the last keys of each sequence, but sequence ", b, " has ",
                       p.key_length(b), " keys"));
  const int64_t trees = n / std::max<int64_t>(p.Lq, 1), L = p.Lq;
  auto order = std::make_shared<std::vector<int32_t>>(size_t(2 * n));
  int32_t* tin = order->data();
  int32_t* tout = tin + n;
  std::vector<int32_t> size(static_cast<size_t>(L)), next(static_cast<size_t>(L));
  for (int64_t t = 0; t < trees; ++t) {
    const int32_t* parent = tree.data + t * L;
    for (int64_t i = 0; i < L; ++i)
      if (parent[i] < -1 || parent[i] >= i)
        fail(cat("tree[", t * L + i, "]"), cat("node ", i, "'s parent must be -1 (a root) or an earlier node in [0, ",
                                               i, ") so that it is an ancestor, given ", parent[i]));
    // Subtree sizes (children come after parents), then each child's pre-order range inside its parent's.
    for (int64_t i = 0; i < L; ++i) size[size_t(i)] = 1;
    for (int64_t i = L - 1; i >= 0; --i)
      if (parent[i] >= 0) size[size_t(parent[i])] += size[size_t(i)];
    int32_t next_root = 0;
    for (int64_t i = 0; i < L; ++i) {
      int32_t& from = parent[i] < 0 ? next_root : next[size_t(parent[i])];
      tin[t * L + i] = from;
      from += size[size_t(i)];
      next[size_t(i)] = tin[t * L + i] + 1;
      tout[t * L + i] = tin[t * L + i] + size[size_t(i)];
    }
  }
  r.tree_parents = tree.data;
  r.tree_per_batch = n != L;
  r.tree_in = tin;
  r.tree_out = tout;
  r.tree_order = std::move(order);
}

// One slope per query head, each finite and small enough for the distances the kernels meet.
const float* check_alibi(const Span<float>& slopes, int64_t Hq) {
  if (int64_t(slopes.size) != Hq)
    fail("alibi_slopes", cat("needs one slope per query head: expected ", Hq, ", given ", slopes.size));
  // The kernels form slope x |d(i) - j| in float32, distances up to 2^31 (a window cache counts
  // positions that far): beyond FLT_MAX / 2^31 the term would overflow to inf (a row of only such
  // keys masked, or NaN for a negative slope) where the float64 reference stays finite.
  constexpr float kMaxSlope = std::numeric_limits<float>::max() / float(kMaxRingLength + 1);
  for (int64_t h = 0; h < Hq; ++h) {
    if (!std::isfinite(slopes[h])) fail(cat("alibi_slopes[", h, "]"), cat("must be finite, given ", slopes[h]));
    if (std::fabs(slopes[h]) > kMaxSlope)
      fail(cat("alibi_slopes[", h, "]"),
           cat("must be at most ", std::setprecision(9), kMaxSlope, " (FLT_MAX / 2^31) in magnitude, so that times a ",
               "distance of up to 2^31 it stays finite in float32; given ", slopes[h]));
  }
  return slopes.data;
}

}  // namespace

namespace {

// A KV cache's positions that a query may need but the ring has overwritten, [sink_tokens, first): such a
// query cannot be answered (docs/semantics.md, "KV cache": capacity and the window).
void check_ring_holds(const Problem& p) {
  const KeySource& kv = p.kv;
  const int64_t S = kv.sink_tokens;
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t first = kv.first[b];
    if (first <= S) continue;
    for (int64_t i = 0; i < p.Lq; ++i) {
      const RowKeys r = row_keys(p, b, i);
      if (r.empty()) continue;
      const bool prefix_gone = r.prefix_end > S, window_gone = std::max(r.lo, S) < std::min(r.hi, first);
      if (!prefix_gone && !window_gone) continue;
      fail("q", cat("query ", i, " of sequence ", b, " (position ", kv.lengths[b] - p.Lq + i, ") attends position ",
                    prefix_gone ? S : std::max(r.lo, S), ", which the ring has overwritten (it holds positions ",
                    S > 0 ? cat("0 to ", S - 1, " and ") : std::string(), first, " to ", kv.lengths[b] - 1,
                    "); a capacity >= window + sink tokens + Lq - 1 = ", kv.window + S + p.Lq - 1, " avoids this"));
    }
  }
}

// ---- The rule groups, in the order they are checked (a call with several mistakes reports the
// first group's); each returns its part of Problem and reads only the parts before it.

// q's shape against K/V's (a tensor's or a cache's): batch, head dim, GQA.
ProblemShape check_shape(const ConstTensor& q, const KeySource& kv) {
  check_tensor(q, "q");
  ProblemShape s;
  s.B = q.shape[0]; s.Hq = q.shape[1]; s.Lq = q.shape[2]; s.D = q.shape[3];
  s.Hkv = kv.H; s.Lk = kv.Lk; s.Dv = kv.Dv;
  expect_dim("k", "batch size (shape[0])", s.B, kv.B, "q's batch size");
  expect_dim("k", "head dim (shape[3])", s.D, kv.D, "q's head dim");
  if (s.Hkv == 0 && s.Hq > 0) fail("k", cat("head count (shape[1]) must be >= 1 when q has ", s.Hq, " heads, given 0"));
  if (s.Hkv > 0 && s.Hq % s.Hkv != 0)
    fail("k", cat("head count (shape[1]) must divide q's head count ", s.Hq, " (GQA), given ", s.Hkv));
  s.group = s.Hkv > 0 ? s.Hq / s.Hkv : 1;
  s.q = q.data; s.qs = row_strides(q);
  s.kv = kv;
  return s;
}

ProblemOutput check_output(const MutableTensor& out, const ProblemShape& s) {
  check_tensor(out, "out");
  bool empty = false;
  for (int d = 0; d < 4; ++d) empty = empty || out.shape[d] == 0;
  if (!empty) check_no_overlap(out, "out");
  expect_dim("out", "batch size (shape[0])", s.B, out.shape[0], "q's batch size");
  expect_dim("out", "head count (shape[1])", s.Hq, out.shape[1], "q's head count");
  expect_dim("out", "sequence length (shape[2])", s.Lq, out.shape[2], "q's sequence length");
  expect_dim("out", "value dim (shape[3])", s.Dv, out.shape[3], "v's value dim");
  return {out.data, row_strides(out)};
}

float check_scale(const Options& o, int64_t D) {
  if (!o.scale) return D > 0 ? float(1.0 / std::sqrt(double(D))) : 1.0f;
  if (!std::isfinite(*o.scale)) fail("scale", cat("must be finite, given ", *o.scale));
  return *o.scale;
}

// Causal and its alignment, lengths, boolean and additive masks, window, prefix.
MaskRules check_masks(const Options& o, const ProblemShape& s) {
  MaskRules m;
  m.causal = o.causal;
  if (o.align != Align::bottom_right && o.align != Align::top_left)
    fail_type("align", cat("must be bottom_right or top_left, given ", int(o.align)));
  m.top_left = o.align == Align::top_left;
  m.key_lengths = s.kv.is_cache() ? s.kv.lengths : check_per_batch(o.key_lengths, "key_lengths", s.B, s.Lk, "Lk");
  m.query_lengths = check_per_batch(o.query_lengths, "query_lengths", s.B, s.Lq, "Lq");

  const int64_t full[4] = {s.B, s.Hq, s.Lq, s.Lk};
  m.allowed = check_mask(o.allowed, "allowed", full);
  m.bias = check_mask(o.bias, "bias", full);

  if (o.window.left < -1) fail("window", cat("left must be >= -1 (-1 = unbounded), given ", o.window.left));
  if (o.window.right < -1) fail("window", cat("right must be >= -1 (-1 = unbounded), given ", o.window.right));
  // Any reach beyond Lq + Lk is unbounded in effect; clamping keeps d(i) +- reach from overflowing.
  const int64_t reach = std::min(s.Lq, kBeyondAnyKey) + std::min(s.Lk, kBeyondAnyKey) + 1;
  m.window_left = std::min(o.window.left, reach);
  m.window_right = std::min(o.window.right, reach);
  if (s.kv.ring) {  // a ring's rule: d(i) - W + 1 <= j <= d(i), on top of the caller's window
    m.window_left = m.window_left < 0 ? s.kv.window - 1 : std::min(m.window_left, s.kv.window - 1);
    m.window_right = 0;
  }
  if (o.prefix < 0) fail("prefix", cat("must be >= 0, given ", o.prefix));
  m.prefix = std::min(o.prefix, reach);
  return m;
}

SegmentRules check_segments(const Options& o, const ProblemShape& s) {
  check_span(o.query_segments, "query_segments");
  check_span(o.key_segments, "key_segments");
  if (o.query_segments.empty() && o.key_segments.empty()) return {};
  // Segment ids on one side only would silently disable the rule, unless that side has no
  // positions at all (B*L = 0: an empty std::vector has no data, and there is nothing to read).
  const int64_t nq = checked_mul(s.B, s.Lq, "query_segments", sizeof(int32_t));
  const int64_t nk = checked_mul(s.B, s.Lk, "key_segments", sizeof(int32_t));
  if (o.query_segments.empty() && nq > 0)
    fail("query_segments", cat("segment ids need both query_segments (B*Lq = ", nq,
                               " ids) and key_segments; only key_segments were given"));
  if (o.key_segments.empty() && nk > 0)
    fail("key_segments", cat("segment ids need both query_segments and key_segments (B*Lk = ", nk,
                             " ids); only query_segments were given"));
  if (int64_t(o.query_segments.size) != nq)
    fail("query_segments", cat("length must be B*Lq = ", nq, ", given ", o.query_segments.size));
  if (int64_t(o.key_segments.size) != nk)
    fail("key_segments", cat("length must be B*Lk = ", nk, ", given ", o.key_segments.size));
  // The kernels test query_segments and index both: a side with no positions gets a stand-in
  // that is never read.
  static const int32_t kNoIds[1] = {0};
  return {o.query_segments.empty() ? kNoIds : o.query_segments.data,
          o.key_segments.empty() ? kNoIds : o.key_segments.data};
}

// One learned sink logit per query head; -inf is "no sink", +inf and NaN are not logits.
const float* check_sinks(const Span<float>& sinks, int64_t Hq) {
  check_span(sinks, "sinks");
  if (sinks.empty()) return nullptr;
  if (int64_t(sinks.size) != Hq)
    fail("sinks", cat("needs one sink logit per query head: expected ", Hq, ", given ", sinks.size));
  for (int64_t h = 0; h < Hq; ++h)
    if (std::isnan(sinks[h]) || sinks[h] == std::numeric_limits<float>::infinity())
      fail(cat("sinks[", h, "]"), cat("must be a finite logit or -inf (no sink), given ", sinks[h]));
  return sinks.data;
}

// ALiBi slopes, learned sinks and the tree: the per-head and per-node rules (the tree reads the
// lengths, so it follows the masks).
HeadRules check_head_rules(const Options& o, const Problem& p) {
  HeadRules r;
  check_span(o.alibi_slopes, "alibi_slopes");
  if (!o.alibi_slopes.empty()) r.alibi_slopes = check_alibi(o.alibi_slopes, p.Hq);
  r.sinks = check_sinks(o.sinks, p.Hq);
  check_span(o.tree, "tree");
  if (!o.tree.empty()) check_tree(o.tree, p, r);
  return r;
}

// Checked in the precision the kernels use: they compute scale / softcap in float, so a
// subnormal softcap (1e-40) or a ratio beyond FLT_MAX would turn scores into inf * 0 = NaN.
float check_softcap(float softcap, float scale) {
  if (!std::isfinite(softcap) || softcap < 0)
    fail("softcap", cat("must be finite and >= 0 (0 = off), given ", softcap));
  if (softcap == 0) return softcap;  // off (a -0 stays as given)
  if (softcap < std::numeric_limits<float>::min())
    fail("softcap", cat("must be 0 (off) or at least ", std::numeric_limits<float>::min(),
                        " (the smallest normal float), given ", softcap));
  const float ratio = scale / softcap;
  if (!std::isfinite(ratio))
    fail("softcap", cat("scale / softcap = ", double(scale), " / ", double(softcap),
                        " overflows float; use a larger softcap or a smaller scale, given ", softcap));
  return softcap;
}

RopeRules check_rope_rules(const Options& o, const ProblemShape& s) {
  RopeRules r;
  if (o.rope) {
    r.rope = check_rope(*o.rope, s.D, "rope");
    r.rope_keys = true;  // query i at Lk - Lq + i (bottom-right: the last query row at the last key)
  } else if (s.kv.rope) {  // a cache's keys are stored rotated: only the queries turn, each at its own position
    r.rope = s.kv.rope->rope();
    r.rope_q_ends = s.kv.lengths;
  }
  return r;
}

// "automatic, prefill, ... or prefill_split": the rows of maskattn/kernels.inc.
std::string kernel_names() {
  static const char* const kNames[] = {
#define MASKATTN_KERNEL(name) #name,
#include "maskattn/kernels.inc"
#undef MASKATTN_KERNEL
  };
  std::string names;
  for (size_t n = 0; n < std::size(kNames); ++n) names += std::string(n == 0 ? "" : n + 1 == std::size(kNames) ? " or " : ", ") + kNames[n];
  return names;
}

// The fully-masked policy, threads, executor and kernel. Options::target is the dispatch layer's to
// check (dispatch/targets.hpp resolve_target).
RunSettings check_run_settings(const Options& o) {
  if (o.fully_masked != FullyMasked::zero && o.fully_masked != FullyMasked::nan &&
      o.fully_masked != FullyMasked::uniform)
    fail_type("fully_masked", cat("must be zero, nan or uniform, given ", int(o.fully_masked)));
  if (o.threads < 1 || o.threads > kMaxThreads) fail("threads", cat("must be in [1, ", kMaxThreads, "], given ", o.threads));
  if (o.executor && !o.executor->parallel_for)
    fail_type("executor", "parallel_for is empty (a null function); pass nullptr for the default executor");
  if (std::find(std::begin(kKernels), std::end(kKernels), o.kernel) == std::end(kKernels))
    fail_type("kernel", cat("must be ", kernel_names(), ", given ", int(o.kernel)));
  return {o.fully_masked, o.threads, o.executor, o.kernel, o.stats};
}

ExtraOutputRows check_extra_outputs(const ExtraOutputs& extra, const ProblemShape& s) {
  ExtraOutputRows r;
  if (extra.weights) {
    const int64_t n = checked_mul(checked_mul(checked_mul(s.B, s.Hq, "weights"), s.Lq, "weights"), s.Lk, "weights");
    if (extra.weights_size < -1 || (extra.weights_size >= 0 && extra.weights_size != n))
      fail("weights", cat("length must be B*Hq*Lq*Lk = ", n, ", given ", extra.weights_size));
    r.weights = extra.weights;
  }
  if (extra.lse) {
    const int64_t n = checked_mul(checked_mul(s.B, s.Hq, "lse"), s.Lq, "lse");
    if (extra.lse_size < -1 || (extra.lse_size >= 0 && extra.lse_size != n))
      fail("lse", cat("length must be B*Hq*Lq = ", n, ", given ", extra.lse_size));
    r.lse = extra.lse;
  }
  return r;
}

// Sequence lengths, and the scratch the kernel allocates per worker (the reference has none, so
// only a call with an output needs it).
void check_scratch(const ProblemShape& s, bool has_out) {
  // A tensor or a cache without a window holds up to 2^23 positions; a ring counts tokens seen
  // (its length) up to 2^31 - 1 while holding only its slots (a cache's appends enforce both).
  if (s.Lq > kMaxSequenceLength) fail("q", cat("sequence length (shape[2]) must be <= ", kMaxSequenceLength, ", given ", s.Lq));
  const int64_t max_keys = s.kv.ring ? kMaxRingLength : kMaxSequenceLength;
  if (s.Lk > max_keys) fail("k", cat("sequence length (shape[2]) must be <= ", max_keys, ", given ", s.Lk));
  // K and V of the keys one head holds, packed in tiles of up to 128 keys, value rows padded to up
  // to 64 floats. Too much for the address space is the same condition as a failed allocation, and
  // is named the same way. D and Dv may be anything here when their tensors are empty: every step
  // is overflow-checked.
  if (!has_out || (s.D <= 0 && s.Dv <= 0)) return;
  const int64_t held = s.kv.held_keys();
  int64_t keys = 0, floats = 0, dv_pad = 0, per_key = 0;
  const bool overflows = __builtin_add_overflow(s.Dv, 63, &dv_pad) ||
                         __builtin_add_overflow(s.D, dv_pad / 64 * 64, &per_key) ||
                         __builtin_add_overflow(held, 256, &keys) || __builtin_mul_overflow(keys, per_key, &floats);
  if (overflows || floats > kMaxBytes / int64_t(sizeof(float)))
    fail("memory", cat("out of memory: scratch for packed K and V of one head (", held, " keys x (D = ", s.D,
                       " + Dv = ", s.Dv, ") floats) does not fit in the address space"));
}

// Writes one group's part of p.
template <class Part>
void set_part(Problem& p, Part part) { static_cast<Part&>(p) = std::move(part); }

Problem make_problem_checked(const ConstTensor& q, const KeySource& kv, const MutableTensor* out, const Options& o,
                             const ExtraOutputs& extra) {
  Problem p;
  set_part(p, check_shape(q, kv));
  if (out) set_part(p, check_output(*out, p));
  p.scale = check_scale(o, p.D);
  set_part(p, check_masks(o, p));
  set_part(p, check_segments(o, p));
  set_part(p, check_head_rules(o, p));
  p.softcap = check_softcap(o.softcap, p.scale);
  set_part(p, check_rope_rules(o, p));
  set_part(p, check_run_settings(o));
  set_part(p, check_extra_outputs(extra, p));
  check_scratch(p, out != nullptr);
  if (p.kv.ring) check_ring_holds(p);
  return p;
}

}  // namespace

Problem make_problem(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                     const MutableTensor* out, const Options& o, const ExtraOutputs& extra) {
  check_tensor(q, "q");
  check_tensor(k, "k");
  check_tensor(v, "v");
  expect_dim("k", "batch size (shape[0])", q.shape[0], k.shape[0], "q's batch size");
  expect_dim("k", "head dim (shape[3])", q.shape[3], k.shape[3], "q's head dim");
  expect_dim("v", "batch size (shape[0])", q.shape[0], v.shape[0], "q's batch size");
  expect_dim("v", "head count (shape[1])", k.shape[1], v.shape[1], "k's head count");
  expect_dim("v", "sequence length (shape[2])", k.shape[2], v.shape[2], "k's sequence length");
  KeySource kv;
  kv.B = k.shape[0]; kv.H = k.shape[1]; kv.Lk = k.shape[2]; kv.D = k.shape[3]; kv.Dv = v.shape[3];
  kv.k = k.data; kv.ks = row_strides(k);
  kv.v = v.data; kv.vs = row_strides(v);
  return make_problem_checked(q, kv, out, o, extra);
}

Problem make_problem(const ConstTensor& q, const KeySource& kv, const MutableTensor* out, const Options& o,
                     const ExtraOutputs& extra) {
  if (!kv.is_cache()) return make_problem_checked(q, kv, out, o, extra);
  if (!o.key_lengths.empty())
    fail("key_lengths", "is implied by the cache (what each sequence holds) and must not be given");
  if (o.rope)
    fail("rope", "is the cache's own (its configuration's rope: keys were rotated when appended) and must not be "
                 "given to attend");
  try {
    return make_problem_checked(q, kv, out, o, extra);
  } catch (const ArgumentError& e) {
    // K and V are the cache's own: a mismatch with them is the query's (batch, heads, D).
    if (e.argument() != "k" && e.argument() != "v") throw;
    throw ArgumentError("q", cat("does not match the cache (batch ", kv.B, ", kv_heads ", kv.H, ", head_dim ", kv.D,
                                 "): ", e.what()), e.is_type_error());
  }
}

bool check_merge(Span<AttentionPart> parts, const MutableTensor& out) {
  if (parts.data == nullptr || parts.size == 0) fail("parts", "must hold at least one part");
  // parts[0] sets the shape: every other part and out must have it.
  const int64_t* shape = parts[0].output.shape;
  // No rows (B*H*L would overflow when a 0 stands beside dimensions up to 2^62): nothing to write.
  const bool no_rows = shape[0] == 0 || shape[1] == 0 || shape[2] == 0;
  auto same_shape = [&](const int64_t* given, const std::string& name) {
    for (int d = 0; d < 4; ++d)
      if (given[d] != shape[d])
        fail(name, cat("shape must be parts[0]'s [", shape[0], ", ", shape[1], ", ", shape[2], ", ", shape[3],
                       "], given [", given[0], ", ", given[1], ", ", given[2], ", ", given[3], "]"));
  };
  for (size_t p = 0; p < parts.size; ++p) {
    const AttentionPart& part = parts[p];
    const std::string name = cat("parts[", p, "]");
    check_tensor(part.output, name + ".output");
    same_shape(part.output.shape, name + ".output");
    if (part.lse == nullptr && !no_rows) fail(name + ".lse", "is null: merging needs each part's lse [B, H, L]");
  }
  check_tensor(ConstTensor(out), "out");
  same_shape(out.shape, "out");
  return !no_rows;
}

// ---- The mask builders' arguments (maskattn/masks.hpp), checked before anything is allocated.
namespace {

void check_mask_length(int64_t value, const char* name) {
  if (value < 0 || value > kMaxMaskLength)
    fail(name, cat("expected 0 <= ", name, " <= ", kMaxMaskLength, ", given ", value));
}

void check_mask_align(Align align) {
  if (align != Align::bottom_right && align != Align::top_left)
    fail("align", cat("expected Align::bottom_right (0) or Align::top_left (1), given ", static_cast<int>(align)));
}

// Lq * Lk elements, each length already checked to be <= 2^23 (so the product fits in int64).
size_t mask_area(int64_t Lq, int64_t Lk) {
  const int64_t n = Lq * Lk;
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / sizeof(float))
    fail("Lq", cat("size overflows: ", Lq, " x ", Lk, " elements do not fit in memory"));
  return static_cast<size_t>(n);
}

}  // namespace

size_t check_causal_mask(int64_t Lq, int64_t Lk, Align align) {
  check_mask_length(Lq, "Lq");
  check_mask_length(Lk, "Lk");
  check_mask_align(align);
  return mask_area(Lq, Lk);
}

size_t check_window_mask(int64_t Lq, int64_t Lk, int64_t left, int64_t right, Align align) {
  check_mask_length(Lq, "Lq");
  check_mask_length(Lk, "Lk");
  if (left < -1) fail("left", cat("expected left >= -1 (-1 = unbounded), given ", left));
  if (right < -1) fail("right", cat("expected right >= -1 (-1 = unbounded), given ", right));
  check_mask_align(align);
  return mask_area(Lq, Lk);
}

size_t check_padding_mask(const std::vector<int32_t>& lengths, int64_t L) {
  check_mask_length(L, "L");
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 0 || lengths[b] > L)
      fail(cat("lengths[", b, "]"), cat("expected 0 <= lengths[", b, "] <= L = ", L, ", given ", lengths[b]));
  const int64_t B = static_cast<int64_t>(lengths.size());
  if (B > 0 && static_cast<uint64_t>(L) > std::numeric_limits<size_t>::max() / sizeof(float) / static_cast<uint64_t>(B))
    fail("lengths", cat("size overflows: ", B, " x ", L, " elements do not fit in memory"));
  return static_cast<size_t>(B * L);
}

void check_document_lengths(const std::vector<int32_t>& lengths, int64_t L) {
  check_mask_length(L, "L");
  int64_t total = 0;
  for (size_t n = 0; n < lengths.size(); ++n) {
    if (lengths[n] < 0) fail(cat("lengths[", n, "]"), cat("expected lengths[", n, "] >= 0, given ", lengths[n]));
    total += lengths[n];
    if (total > L)
      fail("lengths", cat("expected the documents to fit in L = ", L, ": sum of lengths[0..", n, "] is ", total));
  }
  if (lengths.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("lengths", cat("expected at most ", std::numeric_limits<int32_t>::max(), " documents, given ", lengths.size()));
}

void check_key_padding(const uint8_t* ignore, size_t n) {
  if (ignore == nullptr && n > 0) fail("ignore", cat("expected a buffer of ", n, " entries, given a null pointer"));
}

}  // namespace maskattn::detail

namespace maskattn {
int64_t max_buffer_bytes() noexcept { return detail::kMaxBytes; }
int64_t max_sequence_length() noexcept { return detail::kMaxSequenceLength; }
int64_t max_ring_length() noexcept { return kMaxRingLength; }
RopeFrequencies rope_frequencies(const Rope& rope, int64_t head_dim, int64_t length) {
  if (head_dim < 0) detail::fail("head_dim", detail::cat("must be >= 0, given ", head_dim));
  return detail::checked_rope_frequencies(rope, head_dim, length, "rope");
}
}  // namespace maskattn
