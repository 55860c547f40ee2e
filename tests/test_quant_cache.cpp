// Quantized KV caches (q8, q4; docs/semantics.md, "Quantized caches").
//
// The format is checked against a model written here from the documentation (block bounds, the
// byte layout, per-block scales, non-finite blocks), and attention on every target and kernel
// against the float64 reference over the cache's own dequantized contents (read()):
//   - with queries the kernel quantizes exactly (each block a multiple of its own q8 step), the
//     integer Q·Kᵀ equals the float one, so the usual fp32 error bound applies;
//   - with any queries, within the documented bound for quantizing Q:
//       |O - O_ref| <= (e^(2δ) - 1) max|V| (+ the fp32 bound),
//       δ = scale · max_j Σ_blocks amax(q_block) / 254 · ||k̂_j,block||_1 (of Rq and Rk̂ when rotated).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::FullyMasked;
using maskattn::KeyRotation;
using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::KVType;
using maskattn_test::Rng;
using maskattn_test::Target;
using maskattn_test::TargetTest;

std::vector<float> random(Rng& rng, size_t n, float lo = -1, float hi = 1) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform(lo, hi);
  return x;
}

KVCacheConfig config(int64_t B, int64_t H, int64_t cap, int64_t D, int64_t Dv, KVType k, KVType v) {
  KVCacheConfig c;
  c.batch = B; c.kv_heads = H; c.capacity = cap; c.head_dim = D; c.value_dim = Dv;
  c.dtype = k;
  c.value_dtype = v;
  return c;
}

// ---------------------------------------------------------------------------------------------
// The format, from the documentation
// ---------------------------------------------------------------------------------------------

// Block bounds: q8 |x̂ - x| <= amax/254 (+ the scale's rounding), q4 <= amax/8, block by block.
void expect_block_bounds(KVType t, const std::vector<float>& x, const std::vector<float>& got, int64_t D,
                         const std::string& what) {
  for (size_t row = 0; row * size_t(D) < x.size(); ++row)
    for (int64_t b0 = 0; b0 < D; b0 += 32) {
      double amax = 0;
      for (int64_t i = b0; i < std::min<int64_t>(D, b0 + 32); ++i) amax = std::max(amax, std::fabs(double(x[row * D + i])));
      const double bound = t == KVType::q8 ? amax / 254 * (1 + 1e-5) + amax * 1e-6 : amax / 8 * (1 + 1e-6);
      for (int64_t i = b0; i < std::min<int64_t>(D, b0 + 32); ++i)
        ASSERT_LE(std::fabs(double(got[row * D + i]) - double(x[row * D + i])), bound)
            << what << " row " << row << " element " << i << " amax " << amax;
    }
}

TEST(QuantFormat, BlockBoundsHoldPerBlock) {
  Rng rng("quant/bounds");
  for (KVType t : {KVType::q8, KVType::q4})
    for (int64_t D : {32, 64, 40, 7, 128}) {
      KVCache cache(config(1, 2, 8, D, D, t, t));
      std::vector<float> k = random(rng, size_t(2 * 5 * D)), v = random(rng, size_t(2 * 5 * D));
      // Per-block scales: a block of 1e3 next to a block of 1e-3 in one row.
      for (int64_t i = 0; i < D; ++i) {
        k[size_t(i)] *= i < 32 ? 1e3f : 1e-3f;
        v[size_t(D + i)] *= i < 32 ? 1e-3f : 1e3f;
      }
      cache.append(maskattn::bhld(k.data(), 1, 2, 5, D), maskattn::bhld(v.data(), 1, 2, 5, D));
      const KVCache::Contents c = cache.read(0);
      ASSERT_EQ(c.start, 0);
      ASSERT_EQ(c.length, 5);
      // Rotation is automatic for q4 keys: the bound is on the rotated row, so check values here.
      expect_block_bounds(t, v, c.value, D, std::string(maskattn::kv_type_name(t)) + " values D=" + std::to_string(D));
      if (!cache.keys_rotated())
        expect_block_bounds(t, k, c.key, D, std::string(maskattn::kv_type_name(t)) + " keys D=" + std::to_string(D));
    }
}

// The bytes are what docs/semantics.md says: values, then float32 scales; q8 = round(x / (amax/127)),
// q4 = element i < 16 in the low nibble of byte i, i + 16 in the high nibble, x = d (q - 8).
TEST(QuantFormat, StoredBytesFollowTheDocumentedLayout) {
  Rng rng("quant/layout");
  const int64_t D = 64;
  std::vector<float> k = random(rng, size_t(D)), v = random(rng, size_t(D));
  for (KVType t : {KVType::q8, KVType::q4}) {
    KVCacheConfig cfg = config(1, 1, 2, D, D, t, t);
    cfg.key_rotation = KeyRotation::none;
    KVCache cache(cfg);
    cache.append(maskattn::bhld(k.data(), 1, 1, 1, D), maskattn::bhld(v.data(), 1, 1, 1, D));
    const auto* bytes = static_cast<const uint8_t*>(cache.key_data());
    const int64_t value_bytes = t == KVType::q8 ? 32 : 16, row_bytes = 2 * (value_bytes + 4);
    EXPECT_EQ(cache.byte_length(), 2 * 2 * row_bytes);
    for (int64_t blk = 0; blk < 2; ++blk) {
      float d;
      std::memcpy(&d, bytes + 2 * value_bytes + 4 * blk, 4);
      double amax = 0, m = 0;
      for (int64_t i = 0; i < 32; ++i)
        if (std::fabs(k[size_t(blk * 32 + i)]) > amax) { amax = std::fabs(k[size_t(blk * 32 + i)]); m = k[size_t(blk * 32 + i)]; }
      EXPECT_NEAR(d, t == KVType::q8 ? amax / 127 : -m / 8, 1e-7);
      for (int64_t i = 0; i < 32; ++i) {
        const float x = k[size_t(blk * 32 + i)];
        if (t == KVType::q8) {
          const int q = int8_t(bytes[blk * 32 + i]);
          EXPECT_LE(std::fabs(q - x / d), 0.5001) << i;
        } else {
          const uint8_t byte = bytes[blk * 16 + i % 16];
          const int q = i < 16 ? (byte & 15) : (byte >> 4);
          EXPECT_LE(std::fabs(d * (q - 8) - x), std::fabs(d) / 2 * 1.0001 + (q == 15 ? std::fabs(d) : 0.0)) << i;
        }
      }
    }
  }
}

TEST(QuantFormat, ByteLengthAndMemoryRatios) {
  // Bytes of a row of 128 values, as docs/semantics.md states them per dtype.
  const std::map<KVType, int64_t> row_bytes = {{KVType::float32, 512}, {KVType::float16, 256}, {KVType::bfloat16, 256},
                                               {KVType::q8, 4 * 36}, {KVType::q4, 4 * 20}};
  for (KVType t : maskattn_test::kv_types()) {
    KVCache cache(config(2, 8, 100, 128, 128, t, t));
    ASSERT_EQ(row_bytes.count(t), 1u) << "a dtype without its documented row size: " << maskattn::kv_type_name(t);
    const int64_t row = row_bytes.at(t);
    EXPECT_EQ(cache.byte_length(), 2 * 8 * 100 * 2 * row) << maskattn::kv_type_name(t);
  }
  KVCache f32(config(1, 8, 64, 128, 128, KVType::float32, KVType::float32));
  KVCache q8(config(1, 8, 64, 128, 128, KVType::q8, KVType::q8)), q4(config(1, 8, 64, 128, 128, KVType::q4, KVType::q4));
  EXPECT_LE(double(q8.byte_length()) / double(f32.byte_length()), 0.3);
  EXPECT_LE(double(q4.byte_length()) / double(f32.byte_length()), 0.17);
  EXPECT_EQ(q8.config().key_dtype, KVType::q8);
  EXPECT_EQ(q8.config().value_dtype, KVType::q8);
  KVCacheConfig mixed = config(1, 1, 4, 64, 32, KVType::q8, KVType::q4);
  KVCache m(mixed);
  EXPECT_EQ(m.byte_length(), 4 * (2 * 36 + 20));
  EXPECT_FALSE(m.keys_rotated());
  EXPECT_TRUE(q4.keys_rotated()) << "automatic: on for q4 keys";
}

// A non-finite element makes its block read back NaN, and only its block.
TEST(QuantFormat, NonFiniteBlocksReadBackNaN) {
  for (KVType t : {KVType::q8, KVType::q4}) {
    KVCacheConfig cfg = config(1, 1, 4, 64, 64, t, t);
    cfg.key_rotation = KeyRotation::none;
    KVCache cache(cfg);
    std::vector<float> k(64, 0.5f), v(64, 0.25f);
    k[40] = std::numeric_limits<float>::quiet_NaN();
    v[3] = std::numeric_limits<float>::infinity();
    cache.append(maskattn::bhld(k.data(), 1, 1, 1, 64), maskattn::bhld(v.data(), 1, 1, 1, 64));
    const KVCache::Contents c = cache.read(0);
    for (int i = 0; i < 64; ++i) {
      EXPECT_EQ(std::isnan(c.key[size_t(i)]), i >= 32) << i;
      EXPECT_EQ(std::isnan(c.value[size_t(i)]), i < 32) << i;
    }
  }
}

// Rotation: q·k is unchanged, and 4-bit keys with outlier channels keep their accuracy.
TEST(QuantFormat, RotationSpreadsOutlierChannels) {
  Rng rng("quant/rotation");
  const int64_t D = 128, n = 64;
  std::vector<float> k = random(rng, size_t(n * D));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c : {3, 77}) k[size_t(j * D + c)] *= 10.0f;  // two outlier channels, 10x the rest
  double err[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    KVCacheConfig cfg = config(1, 1, n, D, D, KVType::q4, KVType::q4);
    cfg.key_rotation = r ? KeyRotation::hadamard : KeyRotation::none;
    KVCache cache(cfg);
    cache.append(maskattn::bhld(k.data(), 1, 1, n, D), maskattn::bhld(k.data(), 1, 1, n, D));
    EXPECT_EQ(cache.keys_rotated(), r == 1);
    const KVCache::Contents c = cache.read(0);
    for (size_t i = 0; i < k.size(); ++i) err[r] += std::pow(double(c.key[i]) - double(k[i]), 2);
  }
  EXPECT_LT(err[1], err[0] * 0.5) << "rotated q4 keys: squared error " << err[1] << " vs " << err[0];
}

// ---------------------------------------------------------------------------------------------
// Attention on every target and kernel
// ---------------------------------------------------------------------------------------------

struct Case {
  KVType k, v;
  KeyRotation rotation;
  const char* name;
};
const Case kCases[] = {{KVType::q8, KVType::q8, KeyRotation::automatic, "q8"},
                       {KVType::q4, KVType::q4, KeyRotation::none, "q4"},
                       {KVType::q8, KVType::q4, KeyRotation::automatic, "q8/q4"},
                       {KVType::float16, KVType::q8, KeyRotation::automatic, "f16/q8"},
                       {KVType::q4, KVType::float32, KeyRotation::hadamard, "q4 rotated/f32"}};

class QuantCacheTest : public TargetTest {
 protected:
  maskattn::Options options() const { return cache_options(); }

  // Queries that q8 represents exactly: per block of 32, integers in [-127, 127] (one of them
  // ±127) times a step. The kernel's quantization then changes nothing.
  static std::vector<float> exact_queries(Rng& rng, int64_t rows, int64_t D) {
    std::vector<float> q(size_t(rows * D));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b0 = 0; b0 < D; b0 += 32) {
        const float step = std::ldexp(1.0f, -int(rng.uniform(5, 9)));  // a power of 2: exact products
        const int64_t len = std::min<int64_t>(32, D - b0);
        for (int64_t i = 0; i < len; ++i) q[size_t(r * D + b0 + i)] = step * float(int(rng.uniform(-127, 127)));
        q[size_t(r * D + b0 + int64_t(rng.uniform(0, float(len) - 0.01f)))] = 127 * step;
      }
    return q;
  }

  // attend(q) against the reference over read(b), per sequence. exact: the plain fp32 bound;
  // otherwise the bound above for quantizing Q.
  void check(const KVCache& cache, const std::vector<float>& q, int64_t Hq, int64_t Lq, maskattn::Options opt,
             bool exact, const std::string& what) {
    SCOPED_TRACE(what);
    const KVCacheConfig& cfg = cache.config();
    const int64_t B = cfg.batch, D = cfg.head_dim, Dv = cfg.value_dim, H = cfg.kv_heads;
    std::vector<float> out(size_t(B * Hq * Lq * Dv), -7.0f);
    cache.attend(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(out.data(), B, Hq, Lq, Dv), opt);
    for (int64_t b = 0; b < B; ++b) {
      const KVCache::Contents c = cache.read(b);
      const maskattn_test::CacheHistory history = maskattn_test::cache_history(c, H, D, Dv);  // zero rows before start
      const int64_t L = history.L;
      const std::vector<float>& kf = history.k;
      const std::vector<float>& vf = history.v;
      const maskattn::Options ro = maskattn_test::cache_reference_options(opt, cfg.window);
      const float* qb = q.data() + b * Hq * Lq * D;
      auto run_ref = [&](maskattn::Precision prec) {
        return maskattn::reference_attention(maskattn::bhld(qb, 1, Hq, Lq, D), maskattn::bhld(kf.data(), 1, H, L, D),
                                             maskattn::bhld(vf.data(), 1, H, L, Dv), ro, prec);
      };
      const maskattn::ReferenceResult r64 = run_ref(maskattn::Precision::fp64), r32 = run_ref(maskattn::Precision::fp32);
      const std::vector<float> got(out.begin() + b * Hq * Lq * Dv, out.begin() + (b + 1) * Hq * Lq * Dv);
      const bool quantized_keys = cfg.key_dtype == KVType::q8 || cfg.key_dtype == KVType::q4;
      const bool quantized_values = cfg.value_dtype == KVType::q8 || cfg.value_dtype == KVType::q4;
      double vmax = 0;
      for (float x : vf) vmax = std::max(vmax, std::fabs(double(x)));
      // Where P·V runs in integers (SIMD128), weights are rounded to 16 bits.
      const double pv_rounding = quantized_values ? maskattn_test::integer_pv_rounding(vmax) : 0.0;
      if ((exact || !quantized_keys) && pv_rounding == 0) {
        EXPECT_TRUE(maskattn_test::compare_to_reference("O (sequence " + std::to_string(b) + ")", got, r64.out, r32.out,
                                                        {1, Hq, Lq, Dv}));
        continue;
      }
      if (exact || !quantized_keys) {
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(r64.out[i])) {
            EXPECT_TRUE(std::isnan(got[i])) << i;
          } else {
            ASSERT_LE(std::fabs(double(got[i]) - r64.out[i]), 1e-5 + pv_rounding) << "sequence " << b << " element " << i;
          }
        }
        continue;
      }
      double kmax = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += std::pow(double(kf[size_t((h * L + j) * D + d)]), 2);
          kmax = std::max(kmax, std::sqrt(s));
        }
      for (int64_t row = 0; row < Hq * Lq; ++row) {
        double qn = 0;
        for (int64_t d = 0; d < D; ++d) qn += std::pow(double(qb[row * D + d]), 2);
        const double scale = opt.scale ? double(*opt.scale) : 1.0 / std::sqrt(double(D));
        const double bound = maskattn_test::quantized_query_bound(scale, std::sqrt(qn), D, kmax, vmax, pv_rounding);
        for (int64_t c = 0; c < Dv; ++c) {
          const double want = r64.out[size_t(row * Dv + c)], have = got[size_t(row * Dv + c)];
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(have)) << "row " << row << " col " << c;
          } else {
            ASSERT_LE(std::fabs(have - want), bound) << "row " << row << " col " << c;
          }
        }
      }
    }
  }
};

// A generation on each dtype pair: ragged prompt, decode steps, truncate and re-append, long
// (split-K chunks), GQA 4/2, ALiBi + softcap, a window, every policy on an empty sequence.
TEST_P(QuantCacheTest, MatchesReferenceOverItsContentsThroughAGeneration) {
  for (const Case& cs : kCases) {
    Rng rng(std::string("quant/generation/") + cs.name);
    const int64_t D = 40, Dv = 48;  // a short last block on both
    KVCacheConfig cfg = config(2, 2, 420, D, Dv, cs.k, cs.v);
    cfg.key_rotation = cs.rotation;
    if (cs.rotation == KeyRotation::hadamard) cfg.head_dim = 64;
    const int64_t Dk = cfg.head_dim;
    KVCache cache(cfg);
    auto append = [&](int64_t T, std::vector<int32_t> counts) {
      const std::vector<float> k = random(rng, size_t(2 * 2 * T * Dk)), v = random(rng, size_t(2 * 2 * T * Dv));
      cache.append(maskattn::bhld(k.data(), 2, 2, T, Dk), maskattn::bhld(v.data(), 2, 2, T, Dv), counts);
    };
    const bool exact = !cache.keys_rotated();
    auto queries = [&](int64_t Lq) {
      return exact ? exact_queries(rng, 2 * 4 * Lq, Dk) : random(rng, size_t(2 * 4 * Lq * Dk));
    };
    const std::string name = cs.name;
    append(100, {100, 45});
    check(cache, queries(3), 4, 3, options(), exact, name + " after the prompt");
    for (int step = 0; step < 2; ++step) append(1, {1, 1});
    check(cache, queries(1), 4, 1, options(), exact, name + " decode steps");
    append(4, {4, 2});
    cache.truncate(std::vector<int32_t>{101, 47});
    append(2, {2, 0});
    check(cache, queries(2), 4, 2, options(), exact, name + " truncate and re-append");
    append(300, {300, 300});
    maskattn::Options o = options();
    const std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
    o.alibi_slopes = slopes;
    o.softcap = 20.0f;
    check(cache, queries(1), 4, 1, o, exact, name + " long, ALiBi, softcap");
    cache.truncate(std::vector<int32_t>{cache.lengths()[0], 0});
    for (FullyMasked policy : {FullyMasked::zero, FullyMasked::nan, FullyMasked::uniform}) {
      o = options();
      o.fully_masked = policy;
      check(cache, queries(1), 4, 1, o, exact, name + " empty sequence, policy " + std::to_string(int(policy)));
    }
    o = options();
    o.causal = false;
    o.window = {5, -1};
    check(cache, queries(2), 4, 2, o, exact, name + " window");
  }
}

// P·V over q8/q4 values at every width the kernels cut it into: one block (32), an odd count
// (96: AVX-512's q4 pairs of blocks end on a single one), passes with a remainder (160), more blocks
// than the integer tile takes (640: the dequantizing path); query groups of 1, 2, 4 and 5 rows
// (register blocks of 4 plus 1); tiles ending on an odd key (131 keys); a window (rows that add only
// some of a tile's keys); float32 keys, so P·V alone differs from the reference.
TEST_P(QuantCacheTest, QuantizedValuesAtEveryWidthAndGroup) {
  Rng rng("quant/values-widths");
  for (KVType vt : {KVType::q8, KVType::q4})
    for (int64_t Dv : {32, 96, 160, 640})
      for (int64_t group : {1, 2, 4, 5}) {
        KVCacheConfig cfg = config(1, 2, 140, 16, Dv, KVType::float32, vt);
        KVCache cache(cfg);
        const int64_t L = 131;
        std::vector<float> k = random(rng, size_t(2 * L * 16)), v = random(rng, size_t(2 * L * Dv));
        cache.append(maskattn::bhld(k.data(), 1, 2, L, 16), maskattn::bhld(v.data(), 1, 2, L, Dv));
        const std::string name = std::string(maskattn::kv_type_name(vt)) + " Dv " + std::to_string(Dv) + " group " +
                                 std::to_string(group);
        const std::vector<float> q = random(rng, size_t(2 * group * 2 * 16), -3, 3);
        check(cache, q, 2 * group, 2, options(), true, name);
        maskattn::Options o = options();
        o.causal = false;
        o.window = {40, 3};
        check(cache, q, 2 * group, 2, o, true, name + " window");
      }
}

TEST_P(QuantCacheTest, SlidingWindowRing) {
  Rng rng("quant/ring");
  KVCacheConfig cfg = config(1, 1, 100, 32, 32, KVType::q8, KVType::q4);
  cfg.window = 97;
  KVCache cache(cfg);
  const int64_t bytes = cache.byte_length();
  for (int step = 0; step < 4; ++step) {
    const int64_t T = step == 0 ? 130 : 37;
    const std::vector<float> k = random(rng, size_t(T * 32)), v = random(rng, size_t(T * 32));
    cache.append(maskattn::bhld(k.data(), 1, 1, T, 32), maskattn::bhld(v.data(), 1, 1, T, 32));
    EXPECT_EQ(cache.read(0).start, cache.lengths()[0] - 100);
    check(cache, exact_queries(rng, 2 * 4, 32), 2, 4, options(), true, "ring step " + std::to_string(step));
  }
  EXPECT_EQ(cache.byte_length(), bytes);
}

// Any queries (quantized by the kernel), Gaussian-like data and unit-scale data: within the bound.
TEST_P(QuantCacheTest, AnyQueriesWithinTheDocumentedBound) {
  for (const Case& cs : kCases) {
    if (cs.k != KVType::q8 && cs.k != KVType::q4) continue;
    Rng rng(std::string("quant/any-q/") + cs.name);
    KVCacheConfig cfg = config(1, 2, 300, 64, 64, cs.k, cs.v);
    cfg.key_rotation = cs.rotation;
    KVCache cache(cfg);
    const std::vector<float> k = random(rng, 2 * 300 * 64), v = random(rng, 2 * 300 * 64);
    cache.append(maskattn::bhld(k.data(), 1, 2, 300, 64), maskattn::bhld(v.data(), 1, 2, 300, 64));
    check(cache, random(rng, 4 * 2 * 64, -2, 2), 4, 2, options(), false, cs.name);
  }
}

// Quantized keys under query groups of every size the decode kernel's Q·Kᵀ blocks them in: 1, 2,
// 3, 4, 5, 8, 12 and 16 rows per KV head (groups of 4 and more take their keys in lanes: 16 at a
// time on AVX-512 VNNI, 4 or 8 rows a pass; 8 on AVX2 and AVX-512F, 4 rows a pass), head sizes of 1, 3, 4 and 5 blocks (a pair of blocks
// per transpose, and an odd last one) and of 4, 8 and 16 (the copies with the block count fixed when
// compiled; the last two with fewer groups), key counts that end a tile mid-way through 16 keys and a
// second 512-key chunk. Exact queries and float32 values: Q·Kᵀ alone differs from the reference,
// and by the plain fp32 bound.
TEST_P(QuantCacheTest, QuantizedKeysInEveryRowGroup) {
  Rng rng("quant/key-groups");
  for (KVType kt : {KVType::q8, KVType::q4})
    for (int64_t D : {32, 96, 128, 160, 256, 512})
      for (int64_t group : {1, 2, 3, 4, 5, 8, 12, 16}) {
        if (D >= 256 && group != 1 && group != 4 && group != 5) continue;
        const int64_t Hkv = 2, L = group % 2 ? 131 : 530, Lq = group % 4 == 0 ? 2 : 1, Hq = Hkv * group / Lq;
        KVCacheConfig cfg = config(1, Hkv, L, D, D, kt, KVType::float32);
        cfg.key_rotation = KeyRotation::none;
        KVCache cache(cfg);
        const std::vector<float> k = random(rng, size_t(Hkv * L * D)), v = random(rng, size_t(Hkv * L * D));
        cache.append(maskattn::bhld(k.data(), 1, Hkv, L, D), maskattn::bhld(v.data(), 1, Hkv, L, D));
        check(cache, exact_queries(rng, Hq * Lq, D), Hq, Lq, options(), true,
              std::string(maskattn::kv_type_name(kt)) + " D=" + std::to_string(D) + " rows per KV head " +
                  std::to_string(group));
      }
}

// NaN in a position: attended, the row is NaN (float rules); masked out, it never shows.
TEST_P(QuantCacheTest, NaNOnlyWhereAttended) {
  for (KVType t : {KVType::q8, KVType::q4}) {
    Rng rng(std::string("quant/nan/") + maskattn::kv_type_name(t));
    KVCache cache(config(1, 1, 80, 32, 32, t, t));
    std::vector<float> k = random(rng, 70 * 32), v = random(rng, 70 * 32);
    k[size_t(10 * 32 + 5)] = std::numeric_limits<float>::quiet_NaN();   // key of position 10
    v[size_t(20 * 32 + 7)] = std::numeric_limits<float>::infinity();    // value of position 20
    cache.append(maskattn::bhld(k.data(), 1, 1, 70, 32), maskattn::bhld(v.data(), 1, 1, 70, 32));
    std::vector<float> q = exact_queries(rng, 1, 32), out(32);
    maskattn::Options o = options();
    o.window = {40, 0};  // sees positions 29..69 only
    cache.attend(maskattn::bhld(q.data(), 1, 1, 1, 32), maskattn::bhld(out.data(), 1, 1, 1, 32), o);
    for (float x : out) EXPECT_TRUE(std::isfinite(x));
    o = options();
    cache.attend(maskattn::bhld(q.data(), 1, 1, 1, 32), maskattn::bhld(out.data(), 1, 1, 1, 32), o);
    for (float x : out) EXPECT_TRUE(std::isnan(x));
  }
}

// A non-finite value alone (finite keys), at head sizes whose value scales are read four blocks at
// a time (128) and with a remainder block (160), one and four query rows per KV head: attended, its
// block's columns are NaN (and only those, when the rest of the row is finite); masked out, the row
// is finite.
TEST_P(QuantCacheTest, NonFiniteValueOnlyWhereAttended) {
  for (KVType t : {KVType::q8, KVType::q4})
    for (int64_t D : {128, 160})
      for (int64_t Hq : {1, 4}) {
        const std::string name = std::string(maskattn::kv_type_name(t)) + " D=" + std::to_string(D) + " Hq=" + std::to_string(Hq);
        Rng rng("quant/nonfinite-v/" + name);
        KVCache cache(config(1, 1, 200, D, D, t, t));
        std::vector<float> k = random(rng, size_t(150 * D)), v = random(rng, size_t(150 * D));
        v[size_t(100 * D + 97)] = std::numeric_limits<float>::infinity();  // position 100, block 3
        cache.append(maskattn::bhld(k.data(), 1, 1, 150, D), maskattn::bhld(v.data(), 1, 1, 150, D));
        std::vector<float> q = exact_queries(rng, Hq, D), out(size_t(Hq * D));
        maskattn::Options o = options();
        o.window = {40, 0};  // sees positions 109..149 only
        cache.attend(maskattn::bhld(q.data(), 1, Hq, 1, D), maskattn::bhld(out.data(), 1, Hq, 1, D), o);
        for (float x : out) EXPECT_TRUE(std::isfinite(x)) << name;
        cache.attend(maskattn::bhld(q.data(), 1, Hq, 1, D), maskattn::bhld(out.data(), 1, Hq, 1, D), options());
        for (int64_t r = 0; r < Hq; ++r)
          for (int64_t c = 0; c < D; ++c)
            EXPECT_EQ(std::isnan(out[size_t(r * D + c)]), c >= 96 && c < 128) << name << " row " << r << " col " << c;
      }
}

INSTANTIATE_TEST_SUITE_P(Targets, QuantCacheTest, ::testing::ValuesIn(maskattn_test::kernel_target_params()),
                         [](const ::testing::TestParamInfo<maskattn_test::KernelTarget>& info) {
                           return maskattn_test::target_label(info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------------

using maskattn_test::expect_argument_error;

// The decode kernel keeps a call's prepared (quantized) queries in the calling thread's workspace
// for the call's later key chunks; the workspaces are shared by every target. The thread attends
// with target A, then with target B on a cache of another shape and other queries: B's result must
// be what B gives without A before it, bit for bit. Call numbers once came from a counter per target, so B's call
// could carry the number of A's last one and read A's prepared rows (wrong results or a crash):
// the calls below shift B's count against A's, one step per round in each direction, so that such
// a collision happens within the rounds whenever the two counts differ by fewer (always, run alone:
// --gtest_filter='QuantCacheWorkspaces*').
TEST(QuantCacheWorkspaces, PreparedQueriesStayWithTheirCall) {
  std::vector<Target> targets;
  for (Target t : maskattn_test::kernel_targets())
    if (maskattn::target_available(t)) targets.push_back(t);
  for (KVType dtype : {KVType::q8, KVType::q4}) {
    Rng rng(std::string("quant/workspaces/") + maskattn::kv_type_name(dtype));
    auto cache_of = [&](int64_t D, int64_t T) {
      KVCache c(config(1, 1, T, D, D, dtype, dtype));
      const std::vector<float> k = random(rng, size_t(T * D)), v = random(rng, size_t(T * D));
      c.append(maskattn::bhld(k.data(), 1, 1, T, D), maskattn::bhld(v.data(), 1, 1, T, D));
      return c;
    };
    const KVCache first = cache_of(64, 40), second = cache_of(128, 40);
    const std::vector<float> q1 = random(rng, 64), q2 = random(rng, 128);
    auto attend = [](const KVCache& c, const std::vector<float>& q, int64_t D, Target t) {
      std::vector<float> out(static_cast<size_t>(D));
      maskattn::Options o;
      o.target = t;
      c.attend(maskattn::bhld(q.data(), 1, 1, 1, D), maskattn::bhld(out.data(), 1, 1, 1, D), o);
      return out;
    };
    for (Target a : targets)
      for (Target b : targets) {
        if (a == b) continue;
        // On this thread (the WebAssembly builds without pthreads have no other).
        const std::vector<float> alone = attend(second, q2, 128, b);
        std::string failure;
        constexpr int kRounds = 400;
        for (int round = 0; round < 2 * kRounds && failure.empty(); ++round) {
          attend(first, q1, 64, a);
          if (attend(second, q2, 128, b) != alone) failure = "round " + std::to_string(round);
          attend(round < kRounds ? second : first, round < kRounds ? q2 : q1, round < kRounds ? 128 : 64,
                 round < kRounds ? b : a);  // one more call of B, then of A: the counts move
        }
        EXPECT_TRUE(failure.empty()) << maskattn::kv_type_name(dtype) << ": " << maskattn::target_name(a) << " then "
                                     << maskattn::target_name(b) << ", " << failure;
      }
  }
}

TEST(QuantCacheErrors, ConfigurationAndMisuseAreNamed) {
  auto make = [](std::function<void(KVCacheConfig&)> change) {
    return [change] {
      KVCacheConfig c = config(1, 1, 4, 32, 32, KVType::q8, KVType::q8);
      change(c);
      KVCache cache(c);
    };
  };
  expect_argument_error(make([](KVCacheConfig& c) { c.key_dtype = static_cast<KVType>(9); }), "key_dtype", true);
  expect_argument_error(make([](KVCacheConfig& c) { c.value_dtype = static_cast<KVType>(-1); }), "value_dtype", true);
  expect_argument_error(make([](KVCacheConfig& c) { c.key_rotation = static_cast<KeyRotation>(5); }), "key_rotation", true);
  expect_argument_error(make([](KVCacheConfig& c) { c.dtype = KVType::float32; c.value_dtype.reset(); c.key_rotation = KeyRotation::hadamard; }),
               "key_rotation");
  expect_argument_error(make([](KVCacheConfig& c) { c.head_dim = 33; c.key_rotation = KeyRotation::hadamard; }), "key_rotation");
  KVCache cache(config(2, 1, 4, 32, 32, KVType::q4, KVType::q8));
  expect_argument_error([&] { cache.read(2); }, "b");
  expect_argument_error([&] { cache.read(-1); }, "b");
  std::vector<uint16_t> h(2 * 32);
  expect_argument_error([&] {
    cache.append(maskattn::bhld<const uint16_t>(h.data(), 2, 1, 1, 32), maskattn::bhld<const uint16_t>(h.data(), 2, 1, 1, 32));
  }, "k", true);
  std::vector<float> k(2 * 32, 1.0f);
  expect_argument_error([&] { cache.append(maskattn::bhld(k.data(), 2, 1, 1, 16), maskattn::bhld(k.data(), 2, 1, 1, 32)); }, "k");
  EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{0, 0})) << "nothing written";
  // An odd head_dim: q4 keys are then not rotated (automatic), and everything still works.
  KVCache odd(config(1, 1, 4, 33, 33, KVType::q4, KVType::q4));
  EXPECT_FALSE(odd.keys_rotated());
}

}  // namespace
