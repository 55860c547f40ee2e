// RoPE (docs/semantics.md, "Rotary position embedding") beyond the differential rows: attention()
// with rope equals attention on inputs the test rotates itself; a KV cache with rope stores keys
// rotated at their absolute positions (read() shows them) and attend() rotates each query at its
// own position, on every dtype, ring and target; appends in steps equal one attention() with rope;
// keep() re-rotates the rows it moves; bad rope arguments are named and change nothing.
#include <cmath>
#include <cstring>
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

// The test's own rotation of contiguous [H, L, D] rows (row l at position first + l + offset), in
// double, rounded to float once.
std::vector<float> rotate(const std::vector<float>& x, int64_t H, int64_t L, int64_t D, const Rope& r, int64_t first) {
  std::vector<float> out = x;
  const int64_t dims = r.dims ? r.dims : D, half = dims / 2;
  const bool inter = r.layout == RopeLayout::interleaved;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t i = 0; i < half; ++i) {
        const double a = double(first + l + r.offset) / std::pow(r.theta, double(2 * i) / double(dims));
        const int64_t xi = (h * L + l) * D + (inter ? 2 * i : i), yi = (h * L + l) * D + (inter ? 2 * i + 1 : i + half);
        const double u = x[size_t(xi)], w = x[size_t(yi)];
        out[size_t(xi)] = float(u * std::cos(a) - w * std::sin(a));
        out[size_t(yi)] = float(u * std::sin(a) + w * std::cos(a));
      }
  return out;
}

std::vector<float> random(Rng& rng, size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform(-1, 1);
  return x;
}

class RopeTest : public TargetTest {
 protected:
  // cache.attend(q) against the fp64 reference over read(b) (stored, rotated keys) with the queries
  // rotated by the test at lengths[b] - Lq + i. Float keys: the usual bound; q8/q4 keys: the bound of
  // quantizing the (rotated) queries, docs/semantics.md "Quantized caches".
  void check_attend(const KVCache& cache, int64_t Hq, int64_t Lq, Rng& rng, const std::string& what) {
    SCOPED_TRACE(what);
    const KVCacheConfig& cfg = cache.config();
    const int64_t B = cfg.batch, D = cfg.head_dim, Dv = cfg.value_dim, H = cfg.kv_heads;
    const std::vector<float> q = random(rng, size_t(B * Hq * Lq * D));
    std::vector<float> out(size_t(B * Hq * Lq * Dv), -7.0f);
    const maskattn::Options opt = cache_options();
    cache.attend(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(out.data(), B, Hq, Lq, Dv), opt);
    const bool quantized_keys = *cfg.key_dtype == KVType::q8 || *cfg.key_dtype == KVType::q4;
    const bool quantized_values = *cfg.value_dtype == KVType::q8 || *cfg.value_dtype == KVType::q4;
    for (int64_t b = 0; b < B; ++b) {
      const KVCache::Contents c = cache.read(b);
      ASSERT_EQ(c.sinks, 0);
      const maskattn_test::CacheHistory history = maskattn_test::cache_history(c, H, D, Dv);  // zero rows before start
      const int64_t L = history.L;
      const std::vector<float>& kf = history.k;
      const std::vector<float>& vf = history.v;
      const std::vector<float> qb(q.begin() + b * Hq * Lq * D, q.begin() + (b + 1) * Hq * Lq * D);
      const std::vector<float> qr = rotate(qb, Hq, Lq, D, *cfg.rope, L - Lq);
      const maskattn::Options ro = maskattn_test::cache_reference_options(opt, cfg.window);
      auto run_ref = [&](maskattn::Precision prec) {
        return maskattn::reference_attention(maskattn::bhld(qr.data(), 1, Hq, Lq, D), maskattn::bhld(kf.data(), 1, H, L, D),
                                             maskattn::bhld(vf.data(), 1, H, L, Dv), ro, prec);
      };
      const maskattn::ReferenceResult r64 = run_ref(maskattn::Precision::fp64), r32 = run_ref(maskattn::Precision::fp32);
      const std::vector<float> got(out.begin() + b * Hq * Lq * Dv, out.begin() + (b + 1) * Hq * Lq * Dv);
      double vmax = 0, kmax = 0;
      for (float x : vf) vmax = std::max(vmax, std::fabs(double(x)));
      const double pv_rounding = quantized_values ? maskattn_test::integer_pv_rounding(vmax) : 0.0;
      if (!quantized_keys && pv_rounding == 0) {
        EXPECT_TRUE(maskattn_test::compare_to_reference("O (sequence " + std::to_string(b) + ")", got, r64.out, r32.out,
                                                        {1, Hq, Lq, Dv}));
        continue;
      }
      for (int64_t j = 0; j < H * L; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += std::pow(double(kf[size_t(j * D + d)]), 2);
        kmax = std::max(kmax, std::sqrt(s));
      }
      for (int64_t row = 0; row < Hq * Lq; ++row) {
        double qn = 0;
        for (int64_t d = 0; d < D; ++d) qn += std::pow(double(qr[size_t(row * D + d)]), 2);
        const double delta = quantized_keys ? std::sqrt(qn) / 254 * kmax : 0.0;  // scale 1/sqrt(D) x sqrt(D)
        const double bound = (std::exp(2 * delta) - 1) * vmax + 1e-5 * std::max(1.0, vmax) + pv_rounding;
        for (int64_t col = 0; col < Dv; ++col)
          ASSERT_LE(std::fabs(double(got[size_t(row * Dv + col)]) - r64.out[size_t(row * Dv + col)]), bound)
              << "sequence " << b << " row " << row << " col " << col;
      }
    }
  }
};

// Every dtype (and a Hadamard key rotation after RoPE), a ring, both layouts, dims < D, an offset:
// ragged prompt, decode steps, a longer stretch (split-K chunks).
TEST_P(RopeTest, CacheAttendRotatesQueriesAtTheirPositions) {
  struct Variant {
    KVType k, v;
    maskattn::KeyRotation rotation;
    int64_t window;
    Rope rope;
    const char* name;
  };
  const Variant variants[] = {
      {KVType::float32, KVType::float32, maskattn::KeyRotation::automatic, 0, Rope{10000, 0, RopeLayout::halves, 0}, "f32"},
      {KVType::float16, KVType::float16, maskattn::KeyRotation::automatic, 0,
       Rope{500000, 32, RopeLayout::interleaved, 11}, "f16 interleaved dims 32 offset 11"},
      {KVType::q8, KVType::q8, maskattn::KeyRotation::hadamard, 0, Rope{10000, 0, RopeLayout::halves, 3},
       "q8 hadamard"},
      {KVType::q4, KVType::q4, maskattn::KeyRotation::automatic, 0, Rope{10000, 0, RopeLayout::interleaved, 0},
       "q4 (rotated)"},
      {KVType::float32, KVType::float32, maskattn::KeyRotation::automatic, 60, Rope{10000, 48, RopeLayout::halves, 5},
       "f32 ring"},
      {KVType::q8, KVType::float16, maskattn::KeyRotation::automatic, 60, Rope{1000, 0, RopeLayout::halves, 0},
       "q8/f16 ring"},
  };
  for (const Variant& vt : variants) {
    Rng rng(std::string("rope/cache/") + vt.name);
    KVCacheConfig cfg;
    cfg.batch = 2; cfg.kv_heads = 2; cfg.capacity = vt.window ? 70 : 700; cfg.head_dim = 64; cfg.value_dim = 40;
    cfg.dtype = vt.k;
    cfg.value_dtype = vt.v;
    cfg.key_rotation = vt.rotation;
    cfg.window = vt.window;
    cfg.rope = vt.rope;
    KVCache cache(cfg);
    auto append = [&](int64_t T, std::vector<int32_t> counts) {
      const std::vector<float> k = random(rng, size_t(2 * 2 * T * 64)), v = random(rng, size_t(2 * 2 * T * 40));
      cache.append(maskattn::bhld(k.data(), 2, 2, T, 64), maskattn::bhld(v.data(), 2, 2, T, 40), counts);
    };
    append(90, {90, 41});
    check_attend(cache, 4, 3, rng, std::string(vt.name) + " after the prompt");
    for (int step = 0; step < 3; ++step) append(1, {1, 1});
    check_attend(cache, 4, 1, rng, std::string(vt.name) + " after decode steps");
    append(500, {500, 300});
    check_attend(cache, 8, 1, rng, std::string(vt.name) + " long");
  }
}

// Appends in several steps (keys rotated at their absolute positions) then attend equals one
// attention() with rope over the whole sequence (f32: nothing else rounds), every target.
TEST_P(RopeTest, StepsEqualOneAttentionCall) {
  for (RopeLayout layout : {RopeLayout::halves, RopeLayout::interleaved}) {
    Rng rng(std::string("rope/steps/") + (layout == RopeLayout::halves ? "halves" : "interleaved"));
    const int64_t H = 2, Hq = 4, D = 32, L = 77, Lq = 3;
    const Rope r{10000, 0, layout, 9};
    KVCacheConfig cfg;
    cfg.kv_heads = H; cfg.capacity = 100; cfg.head_dim = D;
    cfg.rope = r;
    KVCache cache(cfg);
    const std::vector<float> k = random(rng, size_t(H * L * D)), v = random(rng, size_t(H * L * D));
    const std::vector<float> q = random(rng, size_t(Hq * Lq * D));
    for (int64_t from : {0, 40, 70, 75, 76}) {  // steps [0,40), [40,70), [70,75), [75,76), [76,77)
      const int64_t to = from == 0 ? 40 : from == 40 ? 70 : from == 70 ? 75 : from + 1;
      std::vector<float> ks, vs;
      for (int64_t h = 0; h < H; ++h) {
        ks.insert(ks.end(), k.begin() + (h * L + from) * D, k.begin() + (h * L + to) * D);
        vs.insert(vs.end(), v.begin() + (h * L + from) * D, v.begin() + (h * L + to) * D);
      }
      cache.append(maskattn::bhld(ks.data(), 1, H, to - from, D), maskattn::bhld(vs.data(), 1, H, to - from, D));
    }
    std::vector<float> out(size_t(Hq * Lq * D));
    cache.attend(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(out.data(), 1, Hq, Lq, D), cache_options());
    maskattn::Options o;
    o.causal = true;
    o.rope = r;
    auto ref = [&](maskattn::Precision prec) {
      return maskattn::reference_attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, H, L, D),
                                           maskattn::bhld(v.data(), 1, H, L, D), o, prec);
    };
    EXPECT_TRUE(maskattn_test::compare_to_reference("O", out, ref(maskattn::Precision::fp64).out,
                                                    ref(maskattn::Precision::fp32).out, {1, Hq, Lq, D}));
    // read() returns the stored keys: rotated at their positions.
    const std::vector<float> want = rotate(k, H, L, D, r, 0);
    const KVCache::Contents c = cache.read(0);
    ASSERT_EQ(c.key.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(c.key[i], want[i], 1e-6) << i;
    // attention() with rope on the same target agrees too.
    std::vector<float> out2(out.size());
    o.target = target().target;
    o.kernel = target().kernel;
    maskattn::attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, H, L, D),
                        maskattn::bhld(v.data(), 1, H, L, D), maskattn::bhld(out2.data(), 1, Hq, Lq, D), o);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], out2[i], 2e-6) << i;
  }
}

MASKATTN_INSTANTIATE_FOR_TARGETS(RopeTest);

// attention() with rope equals attention() on Q and K the test rotated (key j at j + offset, query
// i at Lk - Lq + i + offset), and differs from attention without it.
TEST(Rope, AttentionEqualsPreRotatedInputs) {
  Rng rng("rope/pre-rotated");
  const int64_t Hq = 4, H = 2, Lq = 5, Lk = 50, D = 24;
  const std::vector<float> q = random(rng, size_t(Hq * Lq * D)), k = random(rng, size_t(H * Lk * D)),
                           v = random(rng, size_t(H * Lk * D));
  for (RopeLayout layout : {RopeLayout::halves, RopeLayout::interleaved}) {
    const Rope r{10000, 16, layout, 100};
    maskattn::Options o;
    o.causal = true;
    std::vector<float> plain(size_t(Hq * Lq * D)), pre(plain.size()), fused(plain.size());
    const std::vector<float> qr = rotate(q, Hq, Lq, D, r, Lk - Lq), kr = rotate(k, H, Lk, D, r, 0);
    maskattn::attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, H, Lk, D),
                        maskattn::bhld(v.data(), 1, H, Lk, D), maskattn::bhld(plain.data(), 1, Hq, Lq, D), o);
    maskattn::attention(maskattn::bhld(qr.data(), 1, Hq, Lq, D), maskattn::bhld(kr.data(), 1, H, Lk, D),
                        maskattn::bhld(v.data(), 1, H, Lk, D), maskattn::bhld(pre.data(), 1, Hq, Lq, D), o);
    o.rope = r;
    maskattn::attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, H, Lk, D),
                        maskattn::bhld(v.data(), 1, H, Lk, D), maskattn::bhld(fused.data(), 1, Hq, Lq, D), o);
    double moved = 0;
    for (size_t i = 0; i < fused.size(); ++i) {
      ASSERT_NEAR(fused[i], pre[i], 1e-6) << i;
      moved = std::max(moved, std::fabs(double(fused[i]) - plain[i]));
    }
    EXPECT_GT(moved, 1e-3) << "rope changes the result";
  }
}

// keep() after tree verification: the accepted nodes' keys move down and are re-rotated to their
// new positions, so the cache equals one that had only the path appended.
TEST(Rope, KeepReRotatesMovedKeys) {
  for (KVType dtype : {KVType::float32, KVType::float16}) {
    Rng rng("rope/keep");
    const int64_t H = 2, D = 16, P = 20, T = 6;
    KVCacheConfig cfg;
    cfg.kv_heads = H; cfg.capacity = 64; cfg.head_dim = D; cfg.dtype = dtype;
    cfg.rope = Rope{10000, 0, RopeLayout::halves, 2};
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
    const double tol = dtype == KVType::float32 ? 2e-6 : 2e-3;  // f16: the moved rows are rounded again
    for (size_t i = 0; i < a.key.size(); ++i) ASSERT_NEAR(a.key[i], b.key[i], tol) << i;
    EXPECT_EQ(a.value, b.value);
  }
}

// Raw halves into a float16 cache with rope are rotated like the same values given as floats.
TEST(Rope, HalfInputIsRotatedLikeFloatInput) {
  Rng rng("rope/half-input");
  KVCacheConfig cfg;
  cfg.kv_heads = 2; cfg.capacity = 40; cfg.head_dim = 8; cfg.dtype = KVType::float16;
  cfg.rope = Rope{10000, 0, RopeLayout::interleaved, 1};
  KVCache from_floats(cfg), from_halves(cfg);
  std::vector<uint16_t> kh(2 * 30 * 8), vh(kh.size());
  std::vector<float> k(kh.size()), v(kh.size());
  for (size_t i = 0; i < kh.size(); ++i) {
    kh[i] = maskattn::float_to_half(rng.uniform(-1, 1));
    vh[i] = maskattn::float_to_half(rng.uniform(-1, 1));
    k[i] = maskattn::half_to_float(kh[i]);
    v[i] = maskattn::half_to_float(vh[i]);
  }
  from_floats.append(maskattn::bhld(k.data(), 1, 2, 30, 8), maskattn::bhld(v.data(), 1, 2, 30, 8));
  from_halves.append(maskattn::bhld<const uint16_t>(kh.data(), 1, 2, 30, 8),
                     maskattn::bhld<const uint16_t>(vh.data(), 1, 2, 30, 8));
  EXPECT_EQ(0, std::memcmp(from_floats.key_data(), from_halves.key_data(), kh.size() * 2));
  EXPECT_EQ(0, std::memcmp(from_floats.value_data(), from_halves.value_data(), vh.size() * 2));
  EXPECT_NE(0, std::memcmp(from_halves.key_data(), kh.data(), kh.size() * 2)) << "keys are stored rotated";
}

// Bad rope arguments: named (rope.theta, rope.dims, rope.layout, rope.offset), nothing written; a
// cache validates its rope at creation and refuses a per-call one.
TEST(Rope, BadArgumentsAreNamed) {
  const int64_t D = 8;
  std::vector<float> q(2 * D, 0.5f), k(4 * D, 0.25f), v(4 * D, 1.0f), out(2 * D, -7.0f);
  const std::vector<float> before = out;
  struct Bad {
    Rope rope;
    const char* argument;
  };
  Rope odd = Rope{10000, 3, RopeLayout::halves, 0}, nan_theta = Rope{NAN, 0, RopeLayout::halves, 0};
  const Bad bad[] = {
      {Rope{0, 0, RopeLayout::halves, 0}, "rope.theta"},
      {Rope{-10, 0, RopeLayout::halves, 0}, "rope.theta"},
      {nan_theta, "rope.theta"},
      {Rope{INFINITY, 0, RopeLayout::halves, 0}, "rope.theta"},
      {odd, "rope.dims"},
      {Rope{10000, 10, RopeLayout::halves, 0}, "rope.dims"},
      {Rope{10000, -2, RopeLayout::halves, 0}, "rope.dims"},
      {Rope{10000, 0, RopeLayout(7), 0}, "rope.layout"},
      {Rope{10000, 0, RopeLayout::halves, -1}, "rope.offset"},
      {Rope{10000, 0, RopeLayout::halves, int64_t(1) << 31}, "rope.offset"},
  };
  for (const Bad& b : bad) {
    maskattn::Options o;
    o.rope = b.rope;
    try {
      maskattn::attention(maskattn::bhld(q.data(), 1, 1, 2, D), maskattn::bhld(k.data(), 1, 1, 4, D),
                          maskattn::bhld(v.data(), 1, 1, 4, D), maskattn::bhld(out.data(), 1, 1, 2, D), o);
      ADD_FAILURE() << "expected an error naming " << b.argument;
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), b.argument) << e.what();
      EXPECT_EQ(e.is_type_error(), std::string(b.argument) == "rope.layout") << e.what();
    }
    EXPECT_EQ(out, before);
    KVCacheConfig cfg;
    cfg.capacity = 8; cfg.head_dim = D;
    cfg.rope = b.rope;
    try {
      KVCache cache(cfg);
      ADD_FAILURE() << "expected an error naming " << b.argument;
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), b.argument) << e.what();
    }
  }
  // An odd D with dims 0 (all of D) cannot be rotated in pairs.
  maskattn::Options o;
  o.rope = Rope{};
  try {
    maskattn::attention(maskattn::bhld(q.data(), 1, 1, 2, 7), maskattn::bhld(k.data(), 1, 1, 4, 7),
                        maskattn::bhld(v.data(), 1, 1, 4, 7), maskattn::bhld(out.data(), 1, 1, 2, 7), o);
    ADD_FAILURE() << "expected an error";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "rope.dims") << e.what();
  }
  EXPECT_EQ(out, before);
  // dims resolved in the cache's config; a per-call rope on attend is refused.
  KVCacheConfig cfg;
  cfg.capacity = 8; cfg.head_dim = D;
  cfg.rope = Rope{};
  KVCache cache(cfg);
  EXPECT_EQ(cache.config().rope->dims, D);
  cache.append(maskattn::bhld(k.data(), 1, 1, 4, D), maskattn::bhld(v.data(), 1, 1, 4, D));
  maskattn::Options ao = KVCache::default_options();
  ao.rope = Rope{};
  try {
    cache.attend(maskattn::bhld(q.data(), 1, 1, 2, D), maskattn::bhld(out.data(), 1, 1, 2, D), ao);
    ADD_FAILURE() << "expected an error";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "rope") << e.what();
  }
  EXPECT_EQ(out, before);
}

}  // namespace
