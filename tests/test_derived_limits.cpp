// Values the library derives from the caller's parameters, at the edges of their ranges: RoPE's
// frequencies theta^(-2i/dims) and angles p · theta^(-2i/dims) (a subnormal or tiny base overflows
// them: refused naming rope.theta, for attention() and for a cache, nothing written; every base
// accepted gives finite results equal to the float64 reference, its angles formed as the
// reference forms them even where they reach 10^298 radians), keep()'s re-rotation at such angles,
// ALiBi's slope times a distance up to 2^31 (refused past float32's range), and learned sinks and
// scale at float32's limits. The expectations are computed here, independently of the checks.
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::KVType;
using maskattn::Rope;
using maskattn::RopeLayout;
using maskattn_test::Rng;
using maskattn_test::TargetTest;

constexpr int64_t kMaxOffset = (int64_t(1) << 31) - 1;

std::vector<float> random(Rng& rng, size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform(-1, 1);
  return x;
}

// Whether a base is accepted at `dims` rotated dimensions, from the rule in docs/semantics.md: theta
// finite and > 0, and the last pair's frequency theta^(-(dims-2)/dims) times a position of 2^32
// within float64's range. Evaluated in logarithms (long double), apart from the library's pow.
bool theta_accepted(double theta, int64_t dims) {
  if (!std::isfinite(theta) || !(theta > 0)) return false;
  if (dims <= 2) return true;
  const long double e = static_cast<long double>(dims - 2) / static_cast<long double>(dims);
  return -std::log(static_cast<long double>(theta)) * e + std::log(4294967296.0L) <
         std::log(static_cast<long double>(DBL_MAX));
}
// The smallest accepted base at `dims` (0 where every positive double is accepted).
double theta_boundary(int64_t dims) {
  const long double e = static_cast<long double>(dims) / static_cast<long double>(dims - 2);
  return double(std::exp(std::log(4294967296.0L / static_cast<long double>(DBL_MAX)) * e));
}

// Bases at and around every edge: subnormal, tiny, below and above 1, huge, not positive, not finite.
std::vector<double> thetas(int64_t dims) {
  std::vector<double> t = {5e-324, 1e-320, 1e-310, DBL_MIN, 1e-300, 1e-299, 1e-30, 0.5, 1, 10000, 1e300, DBL_MAX,
                           0, -0.0, -1, -DBL_MIN, INFINITY, -INFINITY, NAN};
  const double edge = dims > 2 ? theta_boundary(dims) : 0;
  if (edge >= 4.9e-324) {  // representable: just inside and just outside
    t.push_back(edge * (1 + 1e-9));
    t.push_back(edge * (1 - 1e-9));
  }
  return t;
}

struct Shape {
  int64_t D, dims;  // dims 0: all of D
};
const Shape kShapes[] = {{4, 0}, {26, 0}, {28, 0}, {64, 0}, {128, 64}, {512, 0}};

class DerivedLimits : public TargetTest {};

// attention() with every base of thetas(): accepted exactly when theta_accepted says so; an accepted
// base gives finite results within the usual bound of the float64 reference (at offset 0 and at the
// largest offset, where angles are largest); a refused one names rope.theta and writes nothing.
TEST_P(DerivedLimits, RopeBaseAttention) {
  const int64_t B = 1, Hq = 2, Hkv = 1, Lq = 3, Lk = 70;
  for (const Shape& s : kShapes) {
    const int64_t D = s.D, dims = s.dims ? s.dims : s.D;
    Rng rng("derived/rope/" + std::to_string(D));
    const std::vector<float> q = random(rng, size_t(B * Hq * Lq * D)), k = random(rng, size_t(B * Hkv * Lk * D)),
                             v = random(rng, size_t(B * Hkv * Lk * D));
    const auto qv = maskattn::bhld(q.data(), B, Hq, Lq, D);
    const auto kv = maskattn::bhld(k.data(), B, Hkv, Lk, D), vv = maskattn::bhld(v.data(), B, Hkv, Lk, D);
    for (const double theta : thetas(dims))
      for (const int64_t offset : {int64_t(0), kMaxOffset}) {
        SCOPED_TRACE(testing::Message() << "D " << D << ", dims " << dims << ", theta " << theta << ", offset " << offset);
        maskattn::Options o;
        o.causal = true;
        o.rope = Rope{theta, s.dims, RopeLayout::halves, offset};
        o.target = target().target;
        o.kernel = target().kernel;
        std::vector<float> out(size_t(B * Hq * Lq * D), -7.0f);
        const std::vector<float> before = out;
        if (!theta_accepted(theta, dims)) {
          maskattn_test::expect_argument_error(
              [&] { maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), B, Hq, Lq, D), o); }, "rope.theta");
          EXPECT_EQ(out, before);
          continue;
        }
        maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), B, Hq, Lq, D), o);
        for (float x : out) ASSERT_TRUE(std::isfinite(x));
        o.target = maskattn::Target::reference;
        const auto r64 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp64);
        const auto r32 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp32);
        ASSERT_TRUE(maskattn_test::compare_to_reference("O", out, r64.out, r32.out, {B, Hq, Lq, D}));
      }
  }
}

// A cache with every base: created exactly when theta_accepted says so (else an error naming
// rope.theta), and then appends in two steps and attend() equal one attention() with the same rope
// over the whole sequence in the float64 reference (float32 storage: nothing else rounds).
TEST_P(DerivedLimits, RopeBaseCache) {
  const int64_t H = 1, Hq = 2, L = 70, Lq = 2;
  for (const Shape& s : kShapes) {
    const int64_t D = s.D, dims = s.dims ? s.dims : s.D;
    Rng rng("derived/rope-cache/" + std::to_string(D));
    const std::vector<float> k = random(rng, size_t(H * L * D)), v = random(rng, size_t(H * L * D)),
                             q = random(rng, size_t(Hq * Lq * D));
    for (const double theta : thetas(dims)) {
      const int64_t offset = theta < 1 ? kMaxOffset - L : 0;
      SCOPED_TRACE(testing::Message() << "D " << D << ", dims " << dims << ", theta " << theta);
      KVCacheConfig cfg;
      cfg.kv_heads = H; cfg.capacity = L; cfg.head_dim = D;
      cfg.rope = Rope{theta, s.dims, RopeLayout::interleaved, offset};
      if (!theta_accepted(theta, dims)) {
        maskattn_test::expect_argument_error([&] { KVCache c(cfg); }, "rope.theta");
        continue;
      }
      KVCache cache(cfg);
      for (const auto& [from, to] : {std::pair<int64_t, int64_t>{0, 50}, {50, L}}) {
        std::vector<float> ks(k.begin() + from * D, k.begin() + to * D), vs(v.begin() + from * D, v.begin() + to * D);
        cache.append(maskattn::bhld(ks.data(), 1, H, to - from, D), maskattn::bhld(vs.data(), 1, H, to - from, D));
      }
      std::vector<float> out(size_t(Hq * Lq * D));
      cache.attend(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(out.data(), 1, Hq, Lq, D), cache_options());
      for (float x : out) ASSERT_TRUE(std::isfinite(x));
      maskattn::Options o;
      o.causal = true;
      o.rope = cfg.rope;
      auto ref = [&](maskattn::Precision prec) {
        return maskattn::reference_attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, H, L, D),
                                             maskattn::bhld(v.data(), 1, H, L, D), o, prec).out;
      };
      ASSERT_TRUE(maskattn_test::compare_to_reference("O", out, ref(maskattn::Precision::fp64),
                                                      ref(maskattn::Precision::fp32), {1, Hq, Lq, D}));
    }
  }
}

// The largest ALiBi slope in magnitude, FLT_MAX / 2^31 (times a distance of 2^31 exactly FLT_MAX),
// is accepted in either sign and gives the reference's result (a slope of +max: each row's nearest
// key takes all the weight; -max: its farthest); one float step beyond is refused naming the head's
// slope, nothing written. Non-causal, so that rows see distances on both sides.
TEST_P(DerivedLimits, AlibiSlopeLimit) {
  const int64_t Hq = 4, Hkv = 2, Lq = 3, Lk = 70, D = 8;
  const float max = FLT_MAX / 2147483648.0f;
  Rng rng("derived/alibi");
  const std::vector<float> q = random(rng, size_t(Hq * Lq * D)), k = random(rng, size_t(Hkv * Lk * D)),
                           v = random(rng, size_t(Hkv * Lk * D));
  const auto qv = maskattn::bhld(q.data(), 1, Hq, Lq, D), kv = maskattn::bhld(k.data(), 1, Hkv, Lk, D),
             vv = maskattn::bhld(v.data(), 1, Hkv, Lk, D);
  const std::vector<float> slopes = {max, -max, 0.5f, -max / 3}, above = {0.5f, 0.5f, std::nextafter(max, INFINITY), 0.5f},
                           below = {0.5f, -std::nextafter(max, INFINITY), 0.5f, 0.5f};
  maskattn::Options o;
  o.target = target().target;
  o.kernel = target().kernel;
  std::vector<float> out(size_t(Hq * Lq * D), -7.0f);
  const std::vector<float> before = out;
  o.alibi_slopes = above;
  maskattn_test::expect_argument_error([&] { maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), 1, Hq, Lq, D), o); },
                                       "alibi_slopes[2]");
  o.alibi_slopes = below;
  maskattn_test::expect_argument_error([&] { maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), 1, Hq, Lq, D), o); },
                                       "alibi_slopes[1]");
  EXPECT_EQ(out, before);
  for (const maskattn::Align align : {maskattn::Align::bottom_right, maskattn::Align::top_left}) {
    o.align = align;
    o.alibi_slopes = slopes;
    maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), 1, Hq, Lq, D), o);
    o.target = maskattn::Target::reference;
    const auto r64 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp64);
    const auto r32 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp32);
    o.target = target().target;
    ASSERT_TRUE(maskattn_test::compare_to_reference("O", out, r64.out, r32.out, {1, Hq, Lq, D}));
    // Head 0 (slope +max) takes the key on its diagonal: V of key d(i), exactly.
    const int64_t d0 = align == maskattn::Align::top_left ? 0 : Lk - Lq;
    for (int64_t c = 0; c < D; ++c) ASSERT_EQ(out[size_t(c)], v[size_t(d0 * D + c)]) << c;
  }
}

// The slope limit at the distance it is for: a window cache whose sink token (position 0) is
// 2^31 - 2 positions behind the query. A slope of -max gives the sink the logit ~FLT_MAX (finite:
// max x 2^31 is FLT_MAX exactly), so the output is the sink's V exactly; +max gives it ~-FLT_MAX and
// the key on the diagonal takes all the weight. (Twice the slope would overflow to inf there: NaN,
// or a row of only masked keys; it is refused.) Every target and kernel.
TEST(DerivedLimits, AlibiSlopeLimitAtDistance2p31) {
  const float max = FLT_MAX / 2147483648.0f;
  KVCacheConfig cfg;
  cfg.kv_heads = 1; cfg.capacity = 5; cfg.window = 4; cfg.sink_tokens = 1; cfg.head_dim = 2; cfg.value_dim = 2;
  KVCache cache(cfg);
  const int64_t T = int64_t(1) << 22;
  std::vector<float> k(size_t(2 * T), 0.0f), v(size_t(2 * T), 0.0f);
  k[0] = 0.3f; k[1] = -0.2f; v[0] = 5.0f; v[1] = -7.0f;  // the sink token
  auto append = [&](int64_t n) { cache.append(maskattn::bhld(k.data(), 1, 1, n, 2), maskattn::bhld(v.data(), 1, 1, n, 2)); };
  append(T);
  std::fill(k.begin(), k.begin() + 2, 0.0f);
  std::fill(v.begin(), v.begin() + 2, 0.0f);
  for (int n = 1; n < 511; ++n) append(T);
  append(T - 4);
  const std::vector<float> last_k = {0.1f, 0.4f, -0.5f, 0.2f, 0.7f, 0.1f}, last_v = {1, 2, 3, 4, 6, 8};
  cache.append(maskattn::bhld(last_k.data(), 1, 1, 3, 2), maskattn::bhld(last_v.data(), 1, 1, 3, 2));
  ASSERT_EQ(cache.lengths()[0], maskattn::kMaxRingLength);
  const std::vector<float> q = {0.5f, -0.25f, 0.5f, -0.25f}, slopes = {-max, max};
  for (const maskattn_test::KernelTarget& t : maskattn_test::kernel_target_params()) {
    if (!maskattn::target_available(t.target)) continue;
    SCOPED_TRACE(maskattn_test::target_label(t));
    maskattn::Options o = KVCache::default_options();
    o.target = t.target;
    o.kernel = t.kernel;
    o.alibi_slopes = slopes;
    std::vector<float> out(4, -7.0f), lse(2);
    maskattn::ExtraOutputs extra;
    extra.lse = lse.data();
    cache.attend(maskattn::bhld(q.data(), 1, 2, 1, 2), maskattn::bhld(out.data(), 1, 2, 1, 2), o, extra);
    EXPECT_EQ(out[0], 5.0f);  // head 0 (slope -max): the sink token's V
    EXPECT_EQ(out[1], -7.0f);
    EXPECT_EQ(out[2], 6.0f);  // head 1 (slope +max): the newest position's V
    EXPECT_EQ(out[3], 8.0f);
    EXPECT_TRUE(std::isfinite(lse[0]) && lse[0] > 3e38f) << lse[0];
    const std::vector<float> twice = {-2 * max, max};
    o.alibi_slopes = twice;
    maskattn_test::expect_argument_error(
        [&] { cache.attend(maskattn::bhld(q.data(), 1, 2, 1, 2), maskattn::bhld(out.data(), 1, 2, 1, 2), o); },
        "alibi_slopes[0]");
  }
}

// Learned sinks at float32's ends (+-FLT_MAX; -inf = none) and scale at its ends (the smallest
// subnormal, +-FLT_MAX, with unit inputs whose |q·k| < 1 so that every logit is finite in
// float32), with and without a softcap whose ratio scale / softcap is finite: O and lse as the
// float64 reference gives them.
TEST_P(DerivedLimits, SinksAndScaleAtFloatLimits) {
  const int64_t Hq = 2, Lq = 3, Lk = 70, D = 4;
  Rng rng("derived/sinks-scale");
  std::vector<float> q = random(rng, size_t(Hq * Lq * D)), k = random(rng, size_t(Lk * D));
  for (float& x : q) x *= 0.45f;  // |q·k| <= 4 x 0.45 x 0.45 < 1
  for (float& x : k) x *= 0.45f;
  const std::vector<float> v = random(rng, size_t(Lk * D));
  const auto qv = maskattn::bhld<const float>(q.data(), 1, Hq, Lq, D), kv = maskattn::bhld<const float>(k.data(), 1, 1, Lk, D),
             vv = maskattn::bhld(v.data(), 1, 1, Lk, D);
  struct Case {
    std::vector<float> sinks;
    float scale, softcap;
  };
  const float tiny = std::numeric_limits<float>::denorm_min();
  const Case cases[] = {
      {{FLT_MAX, -FLT_MAX}, 0.5f, 0}, {{-INFINITY, FLT_MAX}, 1.0f, 30}, {{}, tiny, 0}, {{}, -tiny, FLT_MAX},
      {{}, FLT_MAX, 0},               {{}, -FLT_MAX, 0},                {{}, FLT_MAX, 1}, {{0.0f, -FLT_MAX}, -FLT_MAX, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "scale " << c.scale << ", softcap " << c.softcap << ", sinks "
                                    << (c.sinks.empty() ? 0 : c.sinks[0]));
    maskattn::Options o;
    o.causal = true;
    o.scale = c.scale;
    o.softcap = c.softcap;
    o.sinks = c.sinks;
    o.target = target().target;
    o.kernel = target().kernel;
    std::vector<float> out(size_t(Hq * Lq * D)), lse(size_t(Hq * Lq));
    maskattn::ExtraOutputs extra;
    extra.lse = lse.data();
    maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), 1, Hq, Lq, D), o, extra);
    o.target = maskattn::Target::reference;
    const auto r64 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp64);
    const auto r32 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp32);
    ASSERT_TRUE(maskattn_test::compare_to_reference("O", out, r64.out, r32.out, {1, Hq, Lq, D}));
    maskattn_test::Tolerance lse_tol;
    lse_tol.rel_floor = 1e-6;
    lse_tol.cap = 0;
    ASSERT_TRUE(maskattn_test::compare_to_reference("lse", lse, r64.lse, r32.lse, {1, Hq, Lq}, lse_tol));
  }
}

// Logits past float32's range (docs/semantics.md "Numbers"): scale FLT_MAX with q·k = 2 makes a
// logit +inf, so the row is NaN, as the naive float32 reference gives it (float64 stays finite);
// -FLT_MAX makes the other keys' logits -inf and -FLT_MAX: key 1 (q·k = 0) takes all the weight,
// as in float64.
TEST_P(DerivedLimits, LogitsPastFloat32AreInfiniteAsInFloat32) {
  const std::vector<float> q = {1, 1}, k = {1, 1, -1, 1, 0.5f, 0.5f}, v = {1, 2, 3};
  for (const float scale : {FLT_MAX, -FLT_MAX}) {
    maskattn::Options o;
    o.scale = scale;
    o.target = target().target;
    o.kernel = target().kernel;
    std::vector<float> out(1, -7.0f);
    const auto qv = maskattn::bhld(q.data(), 1, 1, 1, 2), kv = maskattn::bhld(k.data(), 1, 1, 3, 2),
               vv = maskattn::bhld(v.data(), 1, 1, 3, 1);
    maskattn::attention(qv, kv, vv, maskattn::bhld(out.data(), 1, 1, 1, 1), o);
    o.target = maskattn::Target::reference;
    const double r32 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp32).out[0];
    const double r64 = maskattn::reference_attention(qv, kv, vv, o, maskattn::Precision::fp64).out[0];
    if (scale > 0) {
      EXPECT_TRUE(std::isnan(out[0]) && std::isnan(r32)) << out[0] << " " << r32;
      EXPECT_EQ(r64, 1.0);  // float64: the first key's logit 2 x FLT_MAX is finite
    } else {
      EXPECT_EQ(out[0], 2.0f);
      EXPECT_EQ(r64, 2.0);
    }
  }
}

MASKATTN_INSTANTIATE_FOR_TARGETS(DerivedLimits);

// keep() moves accepted tree nodes down and turns their keys from the old position's angle to the
// new one's. With a base below 1 the angles are huge (here up to about 10^29 x 2^31 radians), where
// a turn by the angle of (to - from) would differ from the new angle by the rounding of the angles,
// many radians: the kept keys must equal those of a cache that had only the path appended.
TEST(DerivedLimits, KeepAtHugeAnglesEqualsAppendingThePath) {
  for (const double theta : {1e-30, 0.5, 10000.0}) {
    SCOPED_TRACE(testing::Message() << "theta " << theta);
    Rng rng("derived/keep");
    const int64_t H = 2, D = 64, P = 20, T = 6;
    KVCacheConfig cfg;
    cfg.kv_heads = H; cfg.capacity = 64; cfg.head_dim = D;
    cfg.rope = Rope{theta, 0, RopeLayout::halves, kMaxOffset - 64};
    KVCache tree_cache(cfg), path_cache(cfg);
    const std::vector<float> k = random(rng, size_t(H * P * D)), v = random(rng, size_t(H * P * D));
    tree_cache.append(maskattn::bhld(k.data(), 1, H, P, D), maskattn::bhld(v.data(), 1, H, P, D));
    path_cache.append(maskattn::bhld(k.data(), 1, H, P, D), maskattn::bhld(v.data(), 1, H, P, D));
    const std::vector<int32_t> tree = {-1, 0, 0, 1, 2, 4}, path = {0, 2, 4, 5};
    const std::vector<float> tk = random(rng, size_t(H * T * D)), tv = random(rng, size_t(H * T * D));
    tree_cache.append(maskattn::bhld(tk.data(), 1, H, T, D), maskattn::bhld(tv.data(), 1, H, T, D));
    tree_cache.keep(0, tree, path);
    std::vector<float> pk, pv;
    for (int64_t h = 0; h < H; ++h)
      for (int32_t n : path) {
        pk.insert(pk.end(), tk.begin() + (h * T + n) * D, tk.begin() + (h * T + n + 1) * D);
        pv.insert(pv.end(), tv.begin() + (h * T + n) * D, tv.begin() + (h * T + n + 1) * D);
      }
    const int64_t n = int64_t(path.size());
    path_cache.append(maskattn::bhld(pk.data(), 1, H, n, D), maskattn::bhld(pv.data(), 1, H, n, D));
    const KVCache::Contents a = tree_cache.read(0), b = path_cache.read(0);
    ASSERT_EQ(a.key.size(), b.key.size());
    for (size_t i = 0; i < a.key.size(); ++i) ASSERT_NEAR(a.key[i], b.key[i], 2e-6) << i;
    EXPECT_EQ(a.value, b.value);
  }
}

}  // namespace
