// RoPE scaling (docs/semantics.md, "RoPE scaling"): the frequencies and attention factor of each
// type against values worked out by hand for one small config; attention() with each scaling on
// every target and kernel against the float64 reference (which forms the frequencies again, in
// reference.cpp) at positions up to 2^31 - 1, partial rotation included; a KV cache with each
// scaling and every dtype against the same reference; the length a dynamic or LongRoPE scaling
// uses (an append's keys: the length it reaches; a query: the sequence's length); bad fields named.
#include <cmath>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::KVType;
using maskattn::Rope;
using maskattn::RopeLayout;
using maskattn::RopeScaling;
using maskattn::RopeScalingType;
using maskattn_test::Rng;
using maskattn_test::TargetTest;

std::vector<float> random(Rng& rng, size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform(-1, 1);
  return x;
}

RopeScaling scaling(RopeScalingType type, double factor = 0, int64_t original = 0) {
  RopeScaling s;
  s.type = type;
  s.factor = factor;
  s.original_max_positions = original;
  return s;
}

// One config of each type, named, as a model's config.json would state it.
struct Variant {
  const char* name;
  RopeScaling s;
};
std::vector<Variant> variants(int64_t pairs) {
  std::vector<Variant> v;
  v.push_back({"linear 4", scaling(RopeScalingType::linear, 4)});
  v.push_back({"dynamic 2 / 24", scaling(RopeScalingType::dynamic, 2, 24)});
  RopeScaling llama3 = scaling(RopeScalingType::llama3, 8, 32);
  llama3.low_freq_factor = 1;
  llama3.high_freq_factor = 4;
  v.push_back({"llama3 8 (1, 4) / 32", llama3});
  v.push_back({"yarn 4 / 32", scaling(RopeScalingType::yarn, 4, 32)});
  RopeScaling deepseek = scaling(RopeScalingType::yarn, 40, 16);
  deepseek.beta_fast = 32;
  deepseek.beta_slow = 1;
  deepseek.mscale = 1.0;
  deepseek.mscale_all_dim = 0.707;
  v.push_back({"yarn 40 / 16 mscale 1 / 0.707", deepseek});
  RopeScaling longrope = scaling(RopeScalingType::longrope, 4, 24);
  for (int64_t i = 0; i < pairs; ++i) {
    longrope.short_factor.push_back(1.0 + 0.1 * double(i));
    longrope.long_factor.push_back(2.0 + 0.5 * double(i));
  }
  v.push_back({"longrope / 24", longrope});
  RopeScaling factors = scaling(RopeScalingType::factors);
  for (int64_t i = 0; i < pairs; ++i) factors.freq_factors.push_back(i % 3 == 0 ? 1.0 : 1.0 + double(i));
  factors.attention_factor = 0.8;
  v.push_back({"factors, attention 0.8", factors});
  return v;
}

// ---------------------------------------------------------------------------------------------
// The frequencies, worked out by hand: dims 8, theta 10000 (unscaled 1, 0.1, 0.01, 0.001)
// ---------------------------------------------------------------------------------------------

void expect_frequencies(const Rope& r, int64_t length, const std::vector<double>& want, double attention,
                        const std::string& what) {
  SCOPED_TRACE(what);
  const maskattn::RopeFrequencies f = maskattn::rope_frequencies(r, 8, length);
  ASSERT_EQ(f.inv_freq.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(f.inv_freq[i], want[i], 1e-12 * want[i] + 1e-15) << "pair " << i;
  EXPECT_NEAR(f.attention_factor, attention, 1e-12);
}

TEST(RopeScaling, FrequenciesOfEachTypeWorkedOutByHand) {
  Rope r;  // theta 10000, dims = D = 8
  expect_frequencies(r, 100, {1, 0.1, 0.01, 0.001}, 1, "none");
  r.scaling = scaling(RopeScalingType::linear, 4);
  expect_frequencies(r, 100, {0.25, 0.025, 0.0025, 0.00025}, 1, "linear 4: every frequency / 4");
  // dynamic: at 16 positions (<= orig) unchanged; at 32 the base is 10000 (2 · 32 / 16 − 1)^(8/6) =
  // 10000 · 3^(4/3), so pair i turns by 10^-i · 3^(-i/3).
  r.scaling = scaling(RopeScalingType::dynamic, 2, 16);
  expect_frequencies(r, 16, {1, 0.1, 0.01, 0.001}, 1, "dynamic 2 / 16 at 16 positions");
  expect_frequencies(r, 32, {1, 0.1 / std::cbrt(3.0), 0.01 / std::cbrt(9.0), 0.001 / 3}, 1, "dynamic 2 / 16 at 32 positions");
  // llama3 8, low 1, high 4, orig 128: wavelengths 2π / inv = 6.28, 62.8, 628, 6283 against 128 / 4 =
  // 32 and 128 / 1: pair 0 kept, pairs 2 and 3 / 8, pair 1 ramped with smooth = (128 · 0.1 / 2π − 1) / 3.
  r.scaling = scaling(RopeScalingType::llama3, 8, 128);
  r.scaling.low_freq_factor = 1;
  r.scaling.high_freq_factor = 4;
  const double smooth = (12.8 / (2 * M_PI) - 1) / 3;
  expect_frequencies(r, 100, {1, (1 - smooth) * 0.0125 + smooth * 0.1, 0.00125, 0.000125}, 1, "llama3");
  // yarn 4, orig 64, beta 32 / 1: the ramp's ends at 8 ln(64 / (β 2π)) / (2 ln 10000) = −0.497 and
  // 1.008, rounded out to 0 and 2; pair i interpolates by min(i / 2, 1): 1, 0.1 (1/2 · 1/4 + 1/2),
  // 0.01 / 4, 0.001 / 4; attention 0.1 ln 4 + 1.
  r.scaling = scaling(RopeScalingType::yarn, 4, 64);
  expect_frequencies(r, 100, {1, 0.0625, 0.0025, 0.00025}, 0.1 * std::log(4.0) + 1, "yarn");
  r.scaling.mscale = 1;
  r.scaling.mscale_all_dim = 1;
  expect_frequencies(r, 100, {1, 0.0625, 0.0025, 0.00025}, 1, "yarn, mscale = mscale_all_dim: attention 1");
  r.scaling.attention_factor = 0.5;
  expect_frequencies(r, 100, {1, 0.0625, 0.0025, 0.00025}, 0.5, "yarn, attention_factor given");
  // longrope: short factors below orig = 16 positions, long ones past it; attention sqrt(1 + ln 4 / ln 16).
  r.scaling = scaling(RopeScalingType::longrope, 4, 16);
  r.scaling.short_factor = {1, 2, 3, 4};
  r.scaling.long_factor = {5, 6, 7, 8};
  expect_frequencies(r, 16, {1, 0.05, 0.01 / 3, 0.00025}, std::sqrt(1.5), "longrope at 16 positions");
  expect_frequencies(r, 17, {0.2, 0.1 / 6, 0.01 / 7, 0.000125}, std::sqrt(1.5), "longrope at 17 positions");
  r.scaling = scaling(RopeScalingType::factors);
  r.scaling.freq_factors = {1, 2, 4, 8};
  expect_frequencies(r, 100, {1, 0.05, 0.0025, 0.000125}, 1, "factors");
}

// ---------------------------------------------------------------------------------------------
// attention() and caches on every target and kernel, against the float64 reference
// ---------------------------------------------------------------------------------------------

class RopeScalingTest : public TargetTest {};

// Each scaling, halves and interleaved, all of D or part of it, at the start and at 2^31 - 1.
TEST_P(RopeScalingTest, AttentionEqualsTheReference) {
  const int64_t B = 2, Hq = 4, H = 2, L = 37, Lq = 5, D = 24;
  for (int64_t dims : {int64_t(24), int64_t(16)})
    for (const Variant& v : variants(dims / 2))
      for (int64_t offset : {int64_t(0), int64_t(maskattn::kMaxRingLength) - L}) {
        const std::string what = std::string(v.name) + ", dims " + std::to_string(dims) + ", offset " + std::to_string(offset);
        SCOPED_TRACE(what);
        Rng rng("rope-scaling/attention/" + what);
        const std::vector<float> q = random(rng, size_t(B * Hq * Lq * D)), k = random(rng, size_t(B * H * L * D)),
                                 v_ = random(rng, size_t(B * H * L * D));
        maskattn::Options o;
        o.causal = true;
        o.rope = Rope{10000, dims, offset % 2 ? RopeLayout::interleaved : RopeLayout::halves, offset, v.s};
        std::vector<float> out(size_t(B * Hq * Lq * D), -7.0f);
        maskattn::Options ko = o;
        ko.target = target().target;
        ko.kernel = target().kernel;
        maskattn::attention(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(k.data(), B, H, L, D),
                            maskattn::bhld(v_.data(), B, H, L, D), maskattn::bhld(out.data(), B, Hq, Lq, D), ko);
        auto ref = [&](maskattn::Precision prec) {
          return maskattn::reference_attention(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(k.data(), B, H, L, D),
                                               maskattn::bhld(v_.data(), B, H, L, D), o, prec);
        };
        EXPECT_TRUE(maskattn_test::compare_to_reference("O", out, ref(maskattn::Precision::fp64).out,
                                                        ref(maskattn::Precision::fp32).out, {B, Hq, Lq, D}));
      }
}

// The test's rotation of a row at `pos` with a Rope's frequencies at `length` (halves layout),
// rounded to float once: the queries the kernel should see.
void rotate_row(const Rope& rope, int64_t D, const float* x, int64_t pos, int64_t length, float* out) {
  const maskattn::RopeFrequencies f = maskattn::rope_frequencies(rope, D, length);
  const int64_t half = int64_t(f.inv_freq.size());
  for (int64_t d = 0; d < D; ++d) out[d] = x[d];
  for (int64_t i = 0; i < half; ++i) {
    const double a = double(pos + rope.offset) * f.inv_freq[size_t(i)];
    const double xv = x[i], yv = x[i + half];
    out[i] = float((xv * std::cos(a) - yv * std::sin(a)) * f.attention_factor);
    out[i + half] = float((xv * std::sin(a) + yv * std::cos(a)) * f.attention_factor);
  }
}

// A cache of each dtype with each scaling, its keys appended in one step (so a length-dependent
// scaling rotates them at the length its queries see). attend equals the float64 reference over
// what read() holds with the queries rotated as the frequencies say (quantized keys: within the
// bound for quantizing Q); a float32 cache also equals attention() with the same rope on the reference,
// which rotates Q and K with its own frequencies.
TEST_P(RopeScalingTest, CacheEqualsTheReference) {
  const int64_t Hq = 4, H = 2, L = 40, Lq = 3, D = 32;
  for (KVType dtype : maskattn_test::kv_types())
    for (const Variant& v : variants(D / 2)) {
      const std::string what = std::string(v.name) + ", " + maskattn::kv_type_name(dtype);
      SCOPED_TRACE(what);
      Rng rng("rope-scaling/cache/" + what);
      KVCacheConfig cfg;
      cfg.kv_heads = H;
      cfg.capacity = L;
      cfg.head_dim = D;
      cfg.dtype = dtype;
      cfg.rope = Rope{10000, 0, RopeLayout::halves, 5, v.s};
      KVCache cache(cfg);
      const std::vector<float> k = random(rng, size_t(H * L * D)), vals = random(rng, size_t(H * L * D));
      cache.append(maskattn::bhld(k.data(), 1, H, L, D), maskattn::bhld(vals.data(), 1, H, L, D));
      const std::vector<float> q = random(rng, size_t(Hq * Lq * D));
      std::vector<float> out(size_t(Hq * Lq * D), -7.0f);
      cache.attend(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(out.data(), 1, Hq, Lq, D), cache_options());
      const KVCache::Contents c = cache.read(0);
      std::vector<float> qr(q.size());
      for (int64_t r = 0; r < Hq * Lq; ++r) rotate_row(*cfg.rope, D, q.data() + r * D, L - Lq + r % Lq, L + 5, qr.data() + r * D);
      maskattn::Options o;
      o.causal = true;
      auto ref = [&](maskattn::Precision prec) {
        return maskattn::reference_attention(maskattn::bhld(qr.data(), 1, Hq, Lq, D), maskattn::bhld(c.key.data(), 1, H, L, D),
                                             maskattn::bhld(c.value.data(), 1, H, L, D), o, prec);
      };
      const maskattn::ReferenceResult r64 = ref(maskattn::Precision::fp64);
      if (!maskattn::kv_type_info(dtype).quantized) {
        EXPECT_TRUE(maskattn_test::compare_to_reference("O", out, r64.out, ref(maskattn::Precision::fp32).out, {1, Hq, Lq, D}));
      } else {
        double kmax = 0, vmax = 0;
        for (int64_t j = 0; j < H * L; ++j) {
          double n = 0;
          for (int64_t d = 0; d < D; ++d) n += double(c.key[size_t(j * D + d)]) * c.key[size_t(j * D + d)];
          kmax = std::max(kmax, std::sqrt(n));
        }
        for (float x : c.value) vmax = std::max(vmax, double(std::fabs(x)));
        const double pv = maskattn_test::integer_pv_target(target().target) ? maskattn_test::integer_pv_rounding(vmax) : 0.0;
        for (int64_t r = 0; r < Hq * Lq; ++r) {
          double qn = 0;
          for (int64_t d = 0; d < D; ++d) qn += double(qr[size_t(r * D + d)]) * qr[size_t(r * D + d)];
          const double bound = maskattn_test::quantized_query_bound(1 / std::sqrt(double(D)), std::sqrt(qn), D, kmax, vmax, pv);
          for (int64_t e = 0; e < D; ++e)
            ASSERT_LE(std::fabs(double(out[size_t(r * D + e)]) - r64.out[size_t(r * D + e)]), bound) << "row " << r << " col " << e;
        }
      }
      if (dtype == KVType::float32) {
        o.rope = cfg.rope;
        const maskattn::ReferenceResult own =
            maskattn::reference_attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, H, L, D),
                                          maskattn::bhld(vals.data(), 1, H, L, D), o, maskattn::Precision::fp64);
        for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], own.out[i], 2e-5) << "vs the reference's own rotation, element " << i;
      }
    }
}

// The lengths of a length-dependent scaling: an append rotates its keys with the frequencies of the
// length it reaches, a query with those of the sequence's current length; keys keep the rotation
// they were stored with. Checked on the stored keys (read(), f32) and on attend against the
// reference over them, with the frequencies from maskattn::rope_frequencies (checked by hand above).
TEST_P(RopeScalingTest, LengthDependentScalingUsesTheLengthsItSays) {
  const int64_t H = 1, Hq = 2, D = 16, offset = 3;
  for (const Variant& v : variants(D / 2)) {
    Rope rope{10000, 0, RopeLayout::halves, offset, v.s};
    if (!(v.s.type == RopeScalingType::dynamic || v.s.type == RopeScalingType::longrope)) continue;
    SCOPED_TRACE(v.name);
    Rng rng(std::string("rope-scaling/lengths/") + v.name);
    KVCacheConfig cfg;
    cfg.kv_heads = H;
    cfg.capacity = 64;
    cfg.head_dim = D;
    cfg.rope = rope;
    KVCache cache(cfg);
    std::vector<float> all_k;
    std::vector<int64_t> stored_at_length;  // per position: the length its append reached
    for (int64_t T : {int64_t(10), int64_t(9), int64_t(1), int64_t(15)}) {  // 10, 19, 20, 35 positions: across 24
      const std::vector<float> k = random(rng, size_t(H * T * D)), vals = random(rng, size_t(H * T * D));
      cache.append(maskattn::bhld(k.data(), 1, H, T, D), maskattn::bhld(vals.data(), 1, H, T, D));
      all_k.insert(all_k.end(), k.begin(), k.end());
      for (int64_t t = 0; t < T; ++t) stored_at_length.push_back(cache.lengths()[0] + offset);
    }
    const KVCache::Contents c = cache.read(0);
    const int64_t L = cache.lengths()[0];
    auto rotate = [&](const float* x, int64_t pos, int64_t length, float* out) { rotate_row(rope, D, x, pos, length, out); };
    std::vector<float> want(static_cast<size_t>(D));
    for (int64_t j = 0; j < L; ++j) {
      rotate(all_k.data() + j * D, j, stored_at_length[size_t(j)], want.data());
      for (int64_t d = 0; d < D; ++d) ASSERT_NEAR(c.key[size_t(j * D + d)], want[size_t(d)], 2e-6) << "position " << j << " d " << d;
    }
    // A query at the last position, rotated with the frequencies of L + offset, over the stored keys.
    const std::vector<float> q = random(rng, size_t(Hq * D));
    std::vector<float> out(size_t(Hq * D));
    cache.attend(maskattn::bhld(q.data(), 1, Hq, 1, D), maskattn::bhld(out.data(), 1, Hq, 1, D), cache_options());
    std::vector<float> qr(q.size());
    for (int64_t h = 0; h < Hq; ++h) rotate(q.data() + h * D, L - 1, L + offset, qr.data() + h * D);
    maskattn::Options o;
    o.causal = true;
    o.target = maskattn::Target::reference;
    std::vector<float> want_out(out.size());
    maskattn::attention(maskattn::bhld(qr.data(), 1, Hq, 1, D), maskattn::bhld(c.key.data(), 1, H, L, D),
                        maskattn::bhld(c.value.data(), 1, H, L, D), maskattn::bhld(want_out.data(), 1, Hq, 1, D), o);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want_out[i], 2e-5) << i;
  }
}

MASKATTN_INSTANTIATE_FOR_TARGETS(RopeScalingTest);

// ---------------------------------------------------------------------------------------------
// Bad fields: named, nothing written
// ---------------------------------------------------------------------------------------------

TEST(RopeScaling, BadFieldsAreNamedAndWriteNothing) {
  const int64_t D = 8;
  struct Bad {
    const char* argument;
    void (*make)(RopeScaling&);
  };
  const Bad bad[] = {
      {"rope.scaling.factor", [](RopeScaling& s) { s = scaling(RopeScalingType::linear, 0); }},
      {"rope.scaling.factor", [](RopeScaling& s) { s = scaling(RopeScalingType::linear, -2); }},
      {"rope.scaling.factor", [](RopeScaling& s) { s = scaling(RopeScalingType::yarn, std::nan(""), 16); }},
      {"rope.scaling.factor", [](RopeScaling& s) { s = scaling(RopeScalingType::dynamic, INFINITY, 16); }},
      {"rope.scaling.original_max_positions", [](RopeScaling& s) { s = scaling(RopeScalingType::dynamic, 2, 0); }},
      {"rope.scaling.original_max_positions", [](RopeScaling& s) { s = scaling(RopeScalingType::yarn, 2, int64_t(1) << 32); }},
      {"rope.scaling.low_freq_factor", [](RopeScaling& s) { s = scaling(RopeScalingType::llama3, 8, 8192); s.high_freq_factor = 4; }},
      {"rope.scaling.high_freq_factor", [](RopeScaling& s) {
         s = scaling(RopeScalingType::llama3, 8, 8192);
         s.low_freq_factor = 4;
         s.high_freq_factor = 4;
       }},
      {"rope.scaling.beta_slow", [](RopeScaling& s) { s = scaling(RopeScalingType::yarn, 4, 64); s.beta_slow = 0; }},
      {"rope.scaling.mscale", [](RopeScaling& s) { s = scaling(RopeScalingType::yarn, 4, 64); s.mscale = NAN; }},
      {"rope.scaling", [](RopeScaling& s) {  // 0.1 · (−20) · ln 4 + 1 < 0: no scale for the pairs
         s = scaling(RopeScalingType::yarn, 4, 64);
         s.mscale = -20;
         s.mscale_all_dim = 1;
       }},
      {"rope.scaling.attention_factor", [](RopeScaling& s) { s = scaling(RopeScalingType::factors); s.freq_factors = {1, 1, 1, 1}; s.attention_factor = 0; }},
      {"rope.scaling.attention_factor", [](RopeScaling& s) {  // its square takes a unit q·k past float32
         s = scaling(RopeScalingType::factors);
         s.freq_factors = {1, 1, 1, 1};
         s.attention_factor = 1e30;
       }},
      {"rope.scaling.freq_factors", [](RopeScaling& s) { s = scaling(RopeScalingType::factors); s.freq_factors = {1, 2, 3}; }},
      {"rope.scaling.freq_factors[2]", [](RopeScaling& s) { s = scaling(RopeScalingType::factors); s.freq_factors = {1, 2, -3, 4}; }},
      {"rope.scaling", [](RopeScaling& s) { s = scaling(RopeScalingType::factors); s.freq_factors = {1, 1, 1, 1e-310}; }},  // 0.001 / 1e-310 · 2^32: no finite angle
      {"rope.scaling.short_factor", [](RopeScaling& s) { s = scaling(RopeScalingType::longrope, 0, 16); s.long_factor = {1, 1, 1, 1}; }},
      {"rope.scaling.long_factor[0]", [](RopeScaling& s) {
         s = scaling(RopeScalingType::longrope, 0, 16);
         s.short_factor = {1, 1, 1, 1};
         s.long_factor = {NAN, 1, 1, 1};
       }},
      {"rope.scaling.type", [](RopeScaling& s) { s.type = static_cast<RopeScalingType>(42); }},
  };
  std::vector<float> q(D, 0.5f), out;
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.argument);
    out.assign(D, -7.0f);
    Rope r;
    b.make(r.scaling);
    maskattn::Options o;
    o.rope = r;
    try {
      maskattn::attention(maskattn::bhld<const float>(q.data(), 1, 1, 1, D), maskattn::bhld<const float>(q.data(), 1, 1, 1, D),
                          maskattn::bhld<const float>(q.data(), 1, 1, 1, D), maskattn::bhld(out.data(), 1, 1, 1, D), o);
      ADD_FAILURE() << "accepted";
    } catch (const maskattn::ArgumentError& e) {
      EXPECT_EQ(e.argument(), b.argument) << e.what();
    }
    EXPECT_EQ(out, std::vector<float>(D, -7.0f)) << "nothing written";
    KVCacheConfig cfg;
    cfg.capacity = 4;
    cfg.head_dim = D;
    cfg.rope = r;
    try {
      KVCache cache(cfg);
      ADD_FAILURE() << "a cache accepted it";
    } catch (const maskattn::ArgumentError& e) {
      EXPECT_EQ(e.argument(), b.argument) << e.what();
    }
  }
  // dynamic needs dims > 2 (its base grows as (...)^(dims / (dims - 2))).
  Rope two{10000, 2, RopeLayout::halves, 0, scaling(RopeScalingType::dynamic, 2, 16)};
  maskattn_test::expect_argument_error([&] { maskattn::rope_frequencies(two, 8, 10); }, "rope.dims");
  maskattn_test::expect_argument_error([&] { maskattn::rope_frequencies(Rope{}, 8, -1); }, "length");
  maskattn_test::expect_argument_error([&] { maskattn::rope_frequencies(Rope{}, 8, (int64_t(1) << 32) + 1); }, "length");
  maskattn_test::expect_argument_error([&] { maskattn::rope_frequencies(Rope{}, -8, 10); }, "head_dim");
  maskattn_test::expect_argument_error([&] { maskattn::rope_frequencies(Rope{}, 7, 10); }, "rope.dims");  // odd D, all of it
}

}  // namespace
