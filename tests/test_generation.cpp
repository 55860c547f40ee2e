// What generation needs beyond appending (docs/semantics.md, "Generation"): learned attention sinks,
// sink tokens in a sliding-window ring, tree verification and keep(), paged caches and fork().
// Each is checked against something independent: a hand-computed case, the float64 reference over
// the full history, an explicit boolean mask, or a cache built without the feature.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::KVType;
using maskattn::Options;
using maskattn_test::Rng;
using maskattn_test::TargetTest;

class Generation : public TargetTest {};

// `copies` copies of x one after another (a batch of the same prompt).
std::vector<float> repeat(const std::vector<float>& x, int64_t copies) {
  std::vector<float> r;
  for (int64_t c = 0; c < copies; ++c) r.insert(r.end(), x.begin(), x.end());
  return r;
}

std::vector<float> random(Rng& rng, size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform(-1, 1);
  return x;
}

Options target_options(const maskattn_test::KernelTarget& t, bool causal = true) {
  Options o = KVCache::default_options();
  o.causal = causal;
  o.target = t.target;
  o.kernel = t.kernel;
  return o;
}

// out and lse of cache.attend(q) (q [B, Hq, Lq, D]).
struct Attended {
  std::vector<float> out, lse;
};
Attended attend(const KVCache& cache, const std::vector<float>& q, int64_t Hq, int64_t Lq, const Options& o) {
  const KVCacheConfig& c = cache.config();
  Attended r;
  r.out.assign(size_t(c.batch * Hq * Lq * c.value_dim), -7.0f);
  r.lse.assign(size_t(c.batch * Hq * Lq), -7.0f);
  maskattn::ExtraOutputs extra;
  extra.lse = r.lse.data();
  cache.attend(maskattn::bhld(q.data(), c.batch, Hq, Lq, c.head_dim),
               maskattn::bhld(r.out.data(), c.batch, Hq, Lq, c.value_dim), o, extra);
  return r;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isinf(a[i]) && a[i] == b[i]) continue;
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Learned sinks
// ---------------------------------------------------------------------------------------------

// Two keys with logits 0 and ln 3, a sink ln 2: the denominator is 1 + 3 + 2 = 6, so the weights
// are 1/6 and 1/2 (the sink's 1/3 goes to a zero value), O = 6/6 + 2/2 = 2 and lse = ln 6.
TEST_P(Generation, SinkHandComputed) {
  const float q[1] = {std::log(3.0f)}, k[2] = {0.0f, 1.0f}, v[2] = {6.0f, 2.0f};
  const float sinks[1] = {std::log(2.0f)};
  float out[1] = {-7.0f}, lse[1] = {-7.0f}, w[2] = {-7.0f, -7.0f};
  Options o;
  o.scale = 1.0f;
  o.sinks = maskattn::Span<float>(sinks, 1);
  o.target = target().target;
  o.kernel = target().kernel;
  maskattn::ExtraOutputs extra;
  extra.lse = lse;
  extra.weights = w;
  maskattn::attention(maskattn::bhld(q, 1, 1, 1, 1), maskattn::bhld(k, 1, 1, 2, 1), maskattn::bhld(v, 1, 1, 2, 1),
                      maskattn::bhld(out, 1, 1, 1, 1), o, extra);
  EXPECT_NEAR(out[0], 2.0, 1e-6);
  EXPECT_NEAR(w[0], 1.0 / 6, 1e-7);
  EXPECT_NEAR(w[1], 0.5, 1e-7);
  EXPECT_NEAR(lse[0], std::log(6.0), 1e-6);
  // Both keys masked: only the sink is left, O = 0, weights 0 and lse = the sink, whatever the policy.
  const uint8_t none[2] = {0, 0};
  o.allowed = maskattn::MaskView<uint8_t>{none, {1, 1, 1, 2}, {0, 0, 0, 1}};
  o.fully_masked = maskattn::FullyMasked::nan;
  maskattn::attention(maskattn::bhld(q, 1, 1, 1, 1), maskattn::bhld(k, 1, 1, 2, 1), maskattn::bhld(v, 1, 1, 2, 1),
                      maskattn::bhld(out, 1, 1, 1, 1), o, extra);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(lse[0], sinks[0]);
}

// ---------------------------------------------------------------------------------------------
// Tree verification and keep()
// ---------------------------------------------------------------------------------------------

// The [B, 1, Lq, Lk] boolean mask a tree stands for: causal over the cache, then ancestors-or-self.
std::vector<uint8_t> tree_as_mask(const std::vector<int32_t>& parent, const std::vector<int32_t>& lengths,
                                  int64_t Lk) {
  const int64_t T = int64_t(parent.size()), B = int64_t(lengths.size());
  std::vector<uint8_t> m(size_t(B * T * Lk), 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = lengths[size_t(b)] - T;
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j < start; ++j) m[size_t((b * T + i) * Lk + j)] = 1;
      for (int64_t a = i; a >= 0; a = parent[size_t(a)]) m[size_t((b * T + i) * Lk + start + a)] = 1;
    }
  }
  return m;
}

// A Medusa-style tree of 16 nodes over caches of several dtypes and layouts: attend with `tree`
// equals attend with the explicit mask, then keep() leaves exactly the prompt plus the path.
TEST_P(Generation, TreeEqualsExplicitMaskAndKeepCompacts) {
  const std::vector<int32_t> tree = {-1, 0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 13};
  const std::vector<int32_t> path = {0, 1, 4, 8, 13};
  const int64_t T = 16, B = 2, Hkv = 2, Hq = 4, D = 32;
  struct Layout {
    KVType dtype;
    int64_t page_size, window;
  };
  for (const Layout& layout : {Layout{KVType::float32, 0, 0}, Layout{KVType::float16, 0, 0}, Layout{KVType::q8, 16, 0},
                               Layout{KVType::float32, 32, 0}, Layout{KVType::float32, 0, 150}}) {
    SCOPED_TRACE(std::string(maskattn::kv_type_name(layout.dtype)) + " page_size " +
                 std::to_string(layout.page_size) + " window " + std::to_string(layout.window));
    Rng rng("Generation/tree");
    KVCacheConfig cfg;
    cfg.batch = B; cfg.kv_heads = Hkv; cfg.capacity = 400; cfg.head_dim = D; cfg.dtype = layout.dtype;
    cfg.page_size = layout.page_size;
    cfg.window = layout.window;
    KVCache cache(cfg), expected(cfg);
    const std::vector<int32_t> prompt = {300, 123};
    const std::vector<float> kp = random(rng, size_t(B * Hkv * 300 * D)), vp = random(rng, kp.size());
    for (KVCache* c : {&cache, &expected})
      c->append(maskattn::bhld(kp.data(), B, Hkv, 300, D), maskattn::bhld(vp.data(), B, Hkv, 300, D), prompt);
    const std::vector<float> kt = random(rng, size_t(B * Hkv * T * D)), vt = random(rng, kt.size());
    cache.append(maskattn::bhld(kt.data(), B, Hkv, T, D), maskattn::bhld(vt.data(), B, Hkv, T, D));

    const std::vector<float> q = random(rng, size_t(B * Hq * T * D));
    Options with_tree = target_options(target());
    with_tree.tree = tree;
    const std::vector<int32_t> lengths = cache.lengths();
    const int64_t Lk = *std::max_element(lengths.begin(), lengths.end());
    const std::vector<uint8_t> mask = tree_as_mask(tree, lengths, Lk);
    Options with_mask = target_options(target());
    with_mask.allowed = maskattn::MaskView<uint8_t>{mask.data(), {B, 1, T, Lk}, {T * Lk, 0, Lk, 1}};
    const Attended a = attend(cache, q, Hq, T, with_tree), m = attend(cache, q, Hq, T, with_mask);
    EXPECT_LE(max_abs_diff(a.out, m.out), 1e-6);
    EXPECT_LE(max_abs_diff(a.lse, m.lse), 1e-5);

    // Accept the path in sequence 0, nothing in sequence 1.
    cache.keep(0, tree, path);
    cache.keep(1, tree, {});
    std::vector<float> kk(size_t(B * Hkv * path.size() * D)), vk(kk.size());
    for (int64_t h = 0; h < Hkv; ++h)
      for (size_t n = 0; n < path.size(); ++n)
        for (int64_t d = 0; d < D; ++d) {
          kk[size_t((h * int64_t(path.size()) + int64_t(n)) * D + d)] = kt[size_t((h * T + path[n]) * D + d)];
          vk[size_t((h * int64_t(path.size()) + int64_t(n)) * D + d)] = vt[size_t((h * T + path[n]) * D + d)];
        }
    expected.append(maskattn::bhld(kk.data(), B, Hkv, int64_t(path.size()), D),
                    maskattn::bhld(vk.data(), B, Hkv, int64_t(path.size()), D),
                    std::vector<int32_t>{int32_t(path.size()), 0});
    ASSERT_EQ(cache.lengths(), expected.lengths());
    for (int64_t b = 0; b < B; ++b) {
      const KVCache::Contents got = cache.read(b), want = expected.read(b);
      EXPECT_EQ(got.key, want.key) << "sequence " << b;
      EXPECT_EQ(got.value, want.value) << "sequence " << b;
      EXPECT_EQ(got.start, want.start);
    }
    const std::vector<float> q1 = random(rng, size_t(B * Hq * D));
    const Options o = target_options(target());
    EXPECT_EQ(attend(cache, q1, Hq, 1, o).out, attend(expected, q1, Hq, 1, o).out) << "continues from the path";
  }
}

TEST(GenerationErrors, TreeAndKeepMisuseIsNamed) {
  KVCacheConfig cfg;
  cfg.batch = 1; cfg.kv_heads = 1; cfg.capacity = 64; cfg.head_dim = 8;
  KVCache cache(cfg);
  std::vector<float> k(8 * 8, 0.5f);
  cache.append(maskattn::bhld(k.data(), 1, 1, 8, 8), maskattn::bhld(k.data(), 1, 1, 8, 8));
  std::vector<float> q(4 * 8, 0.1f), out(4 * 8, -7.0f);
  const std::vector<float> before = out;
  auto attend_tree = [&](std::vector<int32_t> tree) {
    Options o = KVCache::default_options();
    o.tree = tree;
    cache.attend(maskattn::bhld(q.data(), 1, 1, 4, 8), maskattn::bhld(out.data(), 1, 1, 4, 8), o);
  };
  maskattn_test::expect_argument_error([&] { attend_tree({-1, 0, 3, 1}); }, "tree[2]");  // not an earlier node
  maskattn_test::expect_argument_error([&] { attend_tree({-1, 0, 1}); }, "tree");        // wrong length
  maskattn_test::expect_argument_error([&] { attend_tree({-1, -2, 0, 1}); }, "tree[1]");
  EXPECT_EQ(out, before) << "nothing written";
  const std::vector<int32_t> tree = {-1, 0, 0, 1};
  maskattn_test::expect_argument_error([&] { cache.keep(0, tree, std::vector<int32_t>{1}); }, "path[0]");
  maskattn_test::expect_argument_error([&] { cache.keep(0, tree, std::vector<int32_t>{0, 2, 3}); }, "path[2]");
  maskattn_test::expect_argument_error([&] { cache.keep(0, tree, std::vector<int32_t>{0, 9}); }, "path[1]");
  maskattn_test::expect_argument_error([&] { cache.keep(1, tree, std::vector<int32_t>{0}); }, "b");
  maskattn_test::expect_argument_error([&] { cache.keep(0, std::vector<int32_t>(9, -1), std::vector<int32_t>{0}); },
                                       "tree");
  EXPECT_EQ(cache.lengths(), std::vector<int32_t>{8}) << "nothing changed";
  // Sinks of the wrong length or NaN.
  auto attend_sinks = [&](std::vector<float> sinks) {
    Options o = KVCache::default_options();
    o.sinks = sinks;
    cache.attend(maskattn::bhld(q.data(), 1, 1, 4, 8), maskattn::bhld(out.data(), 1, 1, 4, 8), o);
  };
  maskattn_test::expect_argument_error([&] { attend_sinks({0.0f, 1.0f}); }, "sinks");
  maskattn_test::expect_argument_error([&] { attend_sinks({NAN}); }, "sinks[0]");
  maskattn_test::expect_argument_error([&] { attend_sinks({INFINITY}); }, "sinks[0]");
  EXPECT_EQ(out, before) << "nothing written";
}

// ---------------------------------------------------------------------------------------------
// Sink tokens in the ring
// ---------------------------------------------------------------------------------------------

// What a ring of window W with S sink tokens lets query i (of Lq, over L positions) see, as an
// explicit [1, 1, Lq, L] mask: j <= d(i), and j in the window (j > d(i) - W) or a sink token (j < S).
std::vector<uint8_t> ring_sink_mask(int64_t L, int64_t Lq, int64_t W, int64_t S) {
  std::vector<uint8_t> m(size_t(Lq * L), 0);
  for (int64_t i = 0; i < Lq; ++i) {
    const int64_t d = L - Lq + i;
    for (int64_t j = 0; j <= d; ++j) m[size_t(i * L + j)] = j > d - W || j < S;
  }
  return m;
}

// A ring of window W with S sink tokens equals the full history under that mask: the float64
// reference over every position appended.
TEST_P(Generation, SinkTokensRingEqualsFullHistory) {
  const int64_t B = 2, Hkv = 2, Hq = 4, D = 16, W = 40, S = 4, Lq = 3;
  for (int64_t page_size : {int64_t(0), int64_t(8)}) {
    SCOPED_TRACE("page_size " + std::to_string(page_size));
    Rng rng("Generation/sink_tokens");
    KVCacheConfig cfg;
    cfg.batch = B; cfg.kv_heads = Hkv; cfg.head_dim = D; cfg.window = W; cfg.sink_tokens = S;
    cfg.capacity = W + S + Lq - 1;
    cfg.page_size = page_size;
    KVCache cache(cfg);
    std::vector<std::vector<float>> hk(B), hv(B);  // full history, [position][Hkv][D]
    for (int step = 0; step < 8; ++step) {
      const int64_t T = step == 0 ? 70 : 13;  // the first append alone wraps the ring
      const std::vector<int32_t> counts = {int32_t(T), int32_t(step % 2 ? T : T - 2)};
      const std::vector<float> k = random(rng, size_t(B * Hkv * T * D)), v = random(rng, k.size());
      cache.append(maskattn::bhld(k.data(), B, Hkv, T, D), maskattn::bhld(v.data(), B, Hkv, T, D), counts);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < counts[size_t(b)]; ++t)
          for (int64_t h = 0; h < Hkv; ++h)
            for (int64_t d = 0; d < D; ++d) {
              hk[size_t(b)].push_back(k[size_t(((b * Hkv + h) * T + t) * D + d)]);
              hv[size_t(b)].push_back(v[size_t(((b * Hkv + h) * T + t) * D + d)]);
            }
      const std::vector<float> q = random(rng, size_t(B * Hq * Lq * D));
      Options o = target_options(target());
      o.fully_masked = step == 5 ? maskattn::FullyMasked::uniform : maskattn::FullyMasked::zero;
      const Attended got = attend(cache, q, Hq, Lq, o);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t L = cache.lengths()[size_t(b)];
        std::vector<float> kb(size_t(Hkv * L * D)), vb(kb.size());
        for (int64_t p = 0; p < L; ++p)
          for (int64_t h = 0; h < Hkv; ++h)
            for (int64_t d = 0; d < D; ++d) {
              kb[size_t((h * L + p) * D + d)] = hk[size_t(b)][size_t((p * Hkv + h) * D + d)];
              vb[size_t((h * L + p) * D + d)] = hv[size_t(b)][size_t((p * Hkv + h) * D + d)];
            }
        Options ro = o;
        ro.target = maskattn::Target::reference;
        const std::vector<uint8_t> mask = ring_sink_mask(L, Lq, W, S);
        ro.allowed = maskattn::MaskView<uint8_t>{mask.data(), {1, 1, Lq, L}, {0, 0, L, 1}};
        const maskattn::ReferenceResult ref = maskattn::reference_attention(
            maskattn::bhld(q.data() + b * Hq * Lq * D, 1, Hq, Lq, D), maskattn::bhld(kb.data(), 1, Hkv, L, D),
            maskattn::bhld(vb.data(), 1, Hkv, L, D), ro);
        double err = 0;
        for (int64_t i = 0; i < Hq * Lq * D; ++i)
          err = std::max(err, std::fabs(got.out[size_t(b * Hq * Lq * D + i)] - ref.out[size_t(i)]));
        EXPECT_LE(err, 2e-6) << "step " << step << " sequence " << b;
        // read(): the sink tokens, then the newest positions, as appended.
        const KVCache::Contents c = cache.read(b);
        ASSERT_EQ(c.sinks + c.length, std::min<int64_t>(L, cfg.capacity));
        for (int64_t n = 0; n < c.sinks + c.length; ++n) {
          const int64_t p = n < c.sinks ? n : c.start + n - c.sinks;
          ASSERT_EQ(c.key[size_t(n * D)], hk[size_t(b)][size_t(p * Hkv * D)]) << "row " << n;
        }
      }
    }
  }
}

// Sink tokens are causal: a prompt's first queries (positions below S) do not see the sink tokens
// after them, as StreamingLLM's sinks are ordinary earlier tokens kept forever.
TEST_P(Generation, SinkTokensAreCausal) {
  const int64_t Hq = 2, D = 16, W = 8, S = 4, Lq = 10;
  Rng rng("Generation/sink_tokens_causal");
  KVCacheConfig cfg;
  cfg.head_dim = D; cfg.window = W; cfg.sink_tokens = S; cfg.capacity = W + S + Lq - 1;
  KVCache cache(cfg);
  const std::vector<float> k = random(rng, size_t(Lq * D)), v = random(rng, k.size()), q = random(rng, size_t(Hq * Lq * D));
  cache.append(maskattn::bhld(k.data(), 1, 1, Lq, D), maskattn::bhld(v.data(), 1, 1, Lq, D));
  const Attended got = attend(cache, q, Hq, Lq, target_options(target(), false));  // not even causal: the ring is
  Options ro;
  ro.target = maskattn::Target::reference;
  const std::vector<uint8_t> mask = ring_sink_mask(Lq, Lq, W, S);
  ro.allowed = maskattn::MaskView<uint8_t>{mask.data(), {1, 1, Lq, Lq}, {0, 0, Lq, 1}};
  const maskattn::ReferenceResult ref = maskattn::reference_attention(
      maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, 1, Lq, D), maskattn::bhld(v.data(), 1, 1, Lq, D), ro);
  for (size_t n = 0; n < got.out.size(); ++n) ASSERT_NEAR(got.out[n], ref.out[n], 2e-6) << "element " << n;
  // Query 0 sees key 0 only: its output is V's row 0 exactly.
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(got.out[size_t(h * Lq * D + d)], v[size_t(d)]);
}

// Fork then a multi-token append that wraps a ring whose sink count is not a page multiple: the
// page the wrap lands in is shared, and must be copied before it is written.
TEST(GenerationErrors, ForkedRingWrapCopiesTheSharedPage) {
  KVCacheConfig cfg;
  cfg.batch = 2; cfg.head_dim = 4; cfg.window = 4; cfg.sink_tokens = 2; cfg.capacity = 6; cfg.page_size = 4;
  KVCache cache(cfg);
  std::vector<float> k(2 * 5 * 4);
  for (size_t n = 0; n < k.size(); ++n) k[n] = float(n);
  cache.append(maskattn::bhld(k.data(), 2, 1, 5, 4), maskattn::bhld(k.data(), 2, 1, 5, 4), std::vector<int32_t>{5, 0});
  const KVCache::Contents before = cache.read(0);
  cache.fork(0, 1);
  std::vector<float> other(2 * 2 * 4, -9.0f);
  cache.append(maskattn::bhld(other.data(), 2, 1, 2, 4), maskattn::bhld(other.data(), 2, 1, 2, 4), std::vector<int32_t>{0, 2});
  const KVCache::Contents after = cache.read(0);
  EXPECT_EQ(after.key, before.key) << "sequence 0 changed by an append to its fork";
  EXPECT_EQ(cache.read(1).key.back(), -9.0f);
}

TEST(GenerationErrors, SinkTokensConfigurationIsNamed) {
  KVCacheConfig cfg;
  cfg.kv_heads = 1; cfg.capacity = 64; cfg.head_dim = 8; cfg.sink_tokens = 4;
  maskattn_test::expect_argument_error([&] { KVCache c(cfg); }, "sink_tokens");  // no window
  cfg.window = 62;
  maskattn_test::expect_argument_error([&] { KVCache c(cfg); }, "capacity");     // 64 < 62 + 4
  cfg.sink_tokens = -1;
  maskattn_test::expect_argument_error([&] { KVCache c(cfg); }, "sink_tokens");
  cfg.sink_tokens = 0;
  cfg.page_size = -3;
  maskattn_test::expect_argument_error([&] { KVCache c(cfg); }, "page_size");
}

// ---------------------------------------------------------------------------------------------
// Paged caches and fork()
// ---------------------------------------------------------------------------------------------

// Paged and contiguous caches of every dtype hold the same rows and attend alike (the page cuts only
// move the split-K chunk boundaries), through appends, truncate and reset.
TEST_P(Generation, PagedEqualsContiguous) {
  const int64_t B = 2, Hkv = 2, Hq = 4, D = 64;
  for (KVType dtype : maskattn_test::kv_types()) {
    for (int64_t page_size : {int64_t(1), int64_t(7), int64_t(64)}) {
      SCOPED_TRACE(std::string(maskattn::kv_type_name(dtype)) + " page_size " + std::to_string(page_size));
      // Where the decode kernel's P·V runs in integers (SIMD128 and AVX-512 VNNI over q8/q4 values),
      // page cuts make other tiles and so other 16-bit weight roundings: the two caches may differ by
      // both (|V̂| <= 1 here; about 1e-5 measured). Elsewhere the cuts only move the split-K chunks.
      const bool integer_pv = (dtype == KVType::q8 || dtype == KVType::q4) &&
                              maskattn_test::integer_pv_target(target().target) && target().kernel != maskattn::Kernel::prefill &&
                              target().kernel != maskattn::Kernel::prefill_split;
      const double pv_rounding = integer_pv ? 2 * maskattn_test::integer_pv_rounding(1.0) : 0.0;
      Rng rng("Generation/paged");
      KVCacheConfig cfg;
      cfg.batch = B; cfg.kv_heads = Hkv; cfg.capacity = 700; cfg.head_dim = D; cfg.dtype = dtype;
      KVCache plain(cfg);
      cfg.page_size = page_size;
      KVCache paged(cfg);
      EXPECT_EQ(paged.byte_length(), 0) << "nothing is taken before it is needed";
      EXPECT_EQ(paged.key_data(), nullptr);
      auto append = [&](int64_t T, std::vector<int32_t> counts) {
        const std::vector<float> k = random(rng, size_t(B * Hkv * T * D)), v = random(rng, k.size());
        for (KVCache* c : {&plain, &paged})
          c->append(maskattn::bhld(k.data(), B, Hkv, T, D), maskattn::bhld(v.data(), B, Hkv, T, D), counts);
      };
      auto check = [&](int64_t Lq, const std::string& what) {
        for (int64_t b = 0; b < B; ++b) {
          EXPECT_EQ(paged.read(b).key, plain.read(b).key) << what;
          EXPECT_EQ(paged.read(b).value, plain.read(b).value) << what;
        }
        const std::vector<float> q = random(rng, size_t(B * Hq * Lq * D));
        const Options o = target_options(target());
        EXPECT_LE(max_abs_diff(attend(paged, q, Hq, Lq, o).out, attend(plain, q, Hq, Lq, o).out), 2e-6 + pv_rounding) << what;
      };
      append(600, {600, 250});
      check(1, "prompt");
      check(5, "five rows");
      plain.truncate(std::vector<int32_t>{100, 250});
      paged.truncate(std::vector<int32_t>{100, 250});
      append(3, {3, 1});
      check(1, "after truncate");
      plain.reset();
      paged.reset();
      append(9, {9, 9});
      check(2, "after reset");
    }
  }
}

// A fork tree of 8 sequences over one 2,000-position prompt holds little more than one prompt's
// bytes, and every sequence attends exactly (bit for bit) like an unshared paged cache with the same
// positions; appends and truncates on one sequence never change another.
TEST_P(Generation, ForkSharesPagesAndNeverLeaks) {
  const int64_t B = 8, Hkv = 2, Hq = 8, D = 32, P = 32, prompt = 2000;
  Rng rng("Generation/fork");
  KVCacheConfig cfg;
  cfg.batch = B; cfg.kv_heads = Hkv; cfg.capacity = 2200; cfg.head_dim = D; cfg.page_size = P;
  KVCache cache(cfg), unshared(cfg);
  const std::vector<float> kp = random(rng, size_t(Hkv * prompt * D)), vp = random(rng, kp.size());
  const std::vector<float> kb = repeat(kp, B), vb = repeat(vp, B);
  std::vector<int32_t> only_first(B, 0);
  only_first[0] = int32_t(prompt);
  cache.append(maskattn::bhld(kb.data(), B, Hkv, prompt, D), maskattn::bhld(vb.data(), B, Hkv, prompt, D), only_first);
  const int64_t one_prompt = cache.byte_length();
  // 0 -> 1, 0 -> 2, 1 -> 3, 1 -> 4, 2 -> 5, 3 -> 6, 6 -> 7 (forks of forks).
  const int64_t from[B] = {-1, 0, 0, 1, 1, 2, 3, 6};
  for (int64_t b = 1; b < B; ++b) cache.fork(from[b], b);
  EXPECT_EQ(cache.byte_length(), one_prompt) << "a fork takes no K/V memory";
  EXPECT_EQ(cache.lengths(), std::vector<int32_t>(B, int32_t(prompt)));
  unshared.append(maskattn::bhld(kb.data(), B, Hkv, prompt, D), maskattn::bhld(vb.data(), B, Hkv, prompt, D));
  // Each sequence goes its own way: different new tokens, some roll back.
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> k = random(rng, size_t(B * Hkv * 4 * D)), v = random(rng, k.size());
    const std::vector<int32_t> counts = {4, 1, 3, 0, 2, 4, 1, 3};
    for (KVCache* c : {&cache, &unshared})
      c->append(maskattn::bhld(k.data(), B, Hkv, 4, D), maskattn::bhld(v.data(), B, Hkv, 4, D), counts);
    std::vector<int32_t> back = cache.lengths();
    back[size_t(step)] -= 1;
    cache.truncate(back);
    unshared.truncate(back);
  }
  EXPECT_LE(double(cache.byte_length()), 1.15 * double(one_prompt)) << "little more than one prompt";
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_EQ(cache.read(b).key, unshared.read(b).key) << "sequence " << b;
    EXPECT_EQ(cache.read(b).value, unshared.read(b).value) << "sequence " << b;
  }
  const std::vector<float> q = random(rng, size_t(B * Hq * 2 * D));
  const Options o = target_options(target());
  EXPECT_EQ(attend(cache, q, Hq, 2, o).out, attend(unshared, q, Hq, 2, o).out);
  // Dropping a sequence back to 0 and forking onto it again reuses freed pages.
  const int64_t before = cache.byte_length();
  std::vector<int32_t> lens = cache.lengths();
  lens[7] = 0;
  cache.truncate(lens);
  cache.fork(0, 7);
  EXPECT_EQ(cache.byte_length(), before);
  EXPECT_EQ(cache.read(7).key, cache.read(0).key);
}

// A contiguous cache forks by copying; a fork onto a live sequence (or itself, or out of range) is
// an error that changes nothing.
TEST(GenerationErrors, ForkMisuseIsNamedAndCopyForkWorks) {
  KVCacheConfig cfg;
  cfg.batch = 3; cfg.kv_heads = 2; cfg.capacity = 50; cfg.head_dim = 8; cfg.dtype = KVType::q8;
  KVCache cache(cfg);
  Rng rng("Generation/fork_copy");
  const std::vector<float> k = random(rng, size_t(3 * 2 * 20 * 8)), v = random(rng, k.size());
  cache.append(maskattn::bhld(k.data(), 3, 2, 20, 8), maskattn::bhld(v.data(), 3, 2, 20, 8),
               std::vector<int32_t>{20, 5, 0});
  maskattn_test::expect_argument_error([&] { cache.fork(0, 1); }, "dst");  // live
  maskattn_test::expect_argument_error([&] { cache.fork(2, 2); }, "dst");
  maskattn_test::expect_argument_error([&] { cache.fork(3, 2); }, "src");
  maskattn_test::expect_argument_error([&] { cache.fork(0, -1); }, "dst");
  EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{20, 5, 0}));
  cache.fork(0, 2);
  EXPECT_EQ(cache.read(2).key, cache.read(0).key);
  cache.append(maskattn::bhld(k.data(), 3, 2, 1, 8), maskattn::bhld(v.data(), 3, 2, 1, 8),
               std::vector<int32_t>{0, 0, 1});
  EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{20, 5, 21}));
}

MASKATTN_INSTANTIATE_FOR_TARGETS(Generation);

}  // namespace
