// KVCache against plain attention on the cache's logical contents (docs/semantics.md, "KV cache").
//
// A shadow history keeps, per sequence, every K/V row appended (rounded to halves for float16
// caches and to bfloat16 for bfloat16 caches, by conversions written here independently of the
// library's). After each step,
// cache.attend(q) is compared per sequence with the float64 reference over that sequence's
// positions: exactly "the same problem with a full cache" (and window [W - 1, 0] for a ring).
// Runs on every target with the prefill, decode and split decode kernels.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::FullyMasked;
using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::KVType;
using maskattn_test::KernelTarget;
using maskattn_test::Rng;
using maskattn_test::Target;
using maskattn_test::TargetTest;

// ---------------------------------------------------------------------------------------------
// An independent float16 model: value of half bits by arithmetic, nearest half by search.
// ---------------------------------------------------------------------------------------------

double half_value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 31) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(double(mant), -24);
  return sign * std::ldexp(double(1024 + mant), exp - 25);
}

// Round to nearest, ties to even, by comparing with the neighbouring halves (no bit tricks).
uint16_t nearest_half(float x) {
  if (std::isnan(x)) return 0x7e00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(double(x));
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0;  // largest finite magnitude with value <= a
  for (uint16_t step = 0x4000; step; step >>= 1)
    if (lo + step <= 0x7bff && half_value(uint16_t(lo + step)) <= a) lo = uint16_t(lo + step);
  if (lo == 0x7bff) return sign | lo;
  const double d_lo = a - half_value(lo), d_hi = half_value(uint16_t(lo + 1)) - a;
  const uint16_t pick = d_lo < d_hi ? lo : d_hi < d_lo ? uint16_t(lo + 1) : (lo & 1 ? uint16_t(lo + 1) : lo);
  return sign | pick;
}

TEST(Float16, HalfToFloatIsExactForEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = maskattn::half_to_float(uint16_t(h));
    const double want = half_value(uint16_t(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      ASSERT_EQ(double(f), want) << std::hex << h;
      ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Float16, FloatToHalfRoundsToNearestEven) {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 70000.0f, -1e30f,
                           INFINITY, -INFINITY, 6.1035156e-05f /* smallest normal */,
                           5.9604645e-08f /* smallest subnormal */, 2.9802322e-08f /* half of it: tie to 0 */,
                           2.9802326e-08f, 8.940697e-08f /* 1.5 units: tie to even 2 */, 1e-10f, 0.1f, 0.3333333f};
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half, and the midpoints around it
    const double v = half_value(uint16_t(h)), next = half_value(uint16_t(h + 1));
    xs.push_back(float(v));
    if (h + 1 < 0x7c00) xs.push_back(float((v + next) / 2));  // exact midpoints are floats here
  }
  Rng rng("Float16/random");
  for (int n = 0; n < 200000; ++n) {
    uint32_t bits = uint32_t(rng.next_u64());
    float f;
    std::memcpy(&f, &bits, 4);
    xs.push_back(f);
  }
  for (float x : xs) {
    const uint16_t got = maskattn::float_to_half(x), want = nearest_half(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(maskattn::half_to_float(got))) << x;
      continue;
    }
    ASSERT_EQ(got, want) << "x = " << x << " (bits " << std::hex << [&] { uint32_t b; std::memcpy(&b, &x, 4); return b; }() << ")";
  }
}

// ---------------------------------------------------------------------------------------------
// An independent bfloat16 model: the value is the float whose upper half the bits are; the nearest
// bfloat16 by comparing the two neighbours in double (ties to even).
// ---------------------------------------------------------------------------------------------

float bf16_value(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t nearest_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x)) return uint16_t(bits >> 16);  // any NaN will do: compared by class
  const uint16_t down = uint16_t(bits >> 16);        // toward zero (the same sign)
  if ((bits & 0xffffu) == 0) return down;
  const uint16_t up = uint16_t(down + 1);            // away from zero (the exponent may carry: infinity)
  const double d_down = std::fabs(double(x) - double(bf16_value(down)));
  const double d_up = std::isinf(bf16_value(up)) ? std::ldexp(1.0, 128) - std::fabs(double(x))  // as if 2^128 were finite
                                                 : std::fabs(double(bf16_value(up)) - double(x));
  if (d_down != d_up) return d_down < d_up ? down : up;
  return down & 1 ? up : down;
}

TEST(Bfloat16, EveryBfloat16ReadsBackAsItsFloatAndRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = maskattn::bfloat16_to_float(uint16_t(b));
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    ASSERT_EQ(bits, b << 16) << std::hex << b;  // exact, -0 and subnormals included
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(maskattn::bfloat16_to_float(maskattn::float_to_bfloat16(f)))) << std::hex << b;
      ASSERT_EQ(maskattn::float_to_bfloat16(f) & 0x8000, b & 0x8000) << "a NaN keeps its sign";
    } else {
      ASSERT_EQ(maskattn::float_to_bfloat16(f), b) << std::hex << b;
    }
  }
}

TEST(Bfloat16, FloatToBfloat16RoundsToNearestEven) {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 1.00390625f /* 1 + 2^-8: a tie, to even 1 */,
                           1.01171875f /* 1 + 3 * 2^-8: a tie, to even 1 + 2^-6 */, 3.3895314e38f,
                           std::numeric_limits<float>::max() /* past the last tie: infinity */, -1e-45f,
                           std::numeric_limits<float>::min(), INFINITY, -INFINITY};
  Rng rng("Bfloat16/random");
  for (uint32_t hi = 0; hi < 0x10000; hi += 7)  // every 7th bfloat16, with low halves that matter
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, uint32_t(rng.next_u64() & 0xffff)}) {
      const uint32_t bits = hi << 16 | lo;
      float f;
      std::memcpy(&f, &bits, 4);
      xs.push_back(f);
    }
  for (float x : xs) {
    const uint16_t got = maskattn::float_to_bfloat16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(bf16_value(got))) << "NaN stays NaN (truncating may give infinity)";
      continue;
    }
    ASSERT_EQ(got, nearest_bf16(x)) << "x = " << x;
    // The documented bound (docs/semantics.md): 2^-8 relative (half a unit of 8 significant bits)
    // for normal values, 2^-134 below.
    const double err = std::fabs(double(bf16_value(got)) - double(x));
    if (std::isfinite(bf16_value(got)))
      ASSERT_LE(err, std::fabs(x) >= 0x1p-126f ? std::fabs(double(x)) * 0x1p-8 : 0x1p-134) << "x = " << x;
  }
}

// ---------------------------------------------------------------------------------------------
// The dtype table: one spelling per dtype, earlier spellings accepted, facts that match behaviour
// ---------------------------------------------------------------------------------------------

TEST(KVTypeTable, NamesAreTheDocumentedSpellingsAndEarlierOnesStillWork) {
  // Each dtype as the docs (docs/kv-cache.md, docs/javascript.md) and the JavaScript API spell it,
  // in the enum's order.
  const std::vector<std::pair<KVType, std::string>> documented = {
      {KVType::float32, "float32"}, {KVType::float16, "float16"}, {KVType::q8, "q8"}, {KVType::q4, "q4"},
      {KVType::bfloat16, "bfloat16"}};
  std::vector<std::pair<KVType, std::string>> names;
  for (KVType t : maskattn::kKVTypes) names.emplace_back(t, maskattn::kv_type_name(t));
  EXPECT_EQ(names, documented);
  EXPECT_EQ(maskattn_test::kv_types(), std::vector<KVType>(std::begin(maskattn::kKVTypes), std::end(maskattn::kKVTypes)));
  for (KVType t : maskattn::kKVTypes) {
    EXPECT_EQ(maskattn::kv_type_of(maskattn::kv_type_name(t)), t) << maskattn::kv_type_name(t);
    EXPECT_STREQ(maskattn::kv_type_info(t).name, maskattn::kv_type_name(t));
  }
  // The C++ enumerators and names of the first releases.
  static_assert(KVType::f32 == KVType::float32 && KVType::f16 == KVType::float16 && KVType::bf16 == KVType::bfloat16);
  EXPECT_EQ(maskattn::kv_type_of("f32"), KVType::float32);
  EXPECT_EQ(maskattn::kv_type_of("f16"), KVType::float16);
  EXPECT_EQ(maskattn::kv_type_of("bf16"), KVType::bfloat16);
  EXPECT_STREQ(maskattn::kv_type_name(KVType::f16), "float16");  // printed in the one spelling
  for (const char* other : {"int8", "Float32", "q8 ", "", "?"}) EXPECT_EQ(maskattn::kv_type_of(other), std::nullopt) << other;
  EXPECT_EQ(maskattn::kv_type_of(nullptr), std::nullopt);
  EXPECT_STREQ(maskattn::kv_type_name(static_cast<KVType>(99)), "?");
  EXPECT_STREQ(maskattn::kv_type_info(static_cast<KVType>(99)).name, "?");
}

// The rows start on a cache line (the kernels' 32- and 64-byte loads of a row never straddle two
// lines): small blocks from the heap and large ones mapped apart alike, for every dtype.
TEST(KVCacheStorage, KAndVStartOnACacheLine) {
  for (KVType dtype : maskattn::kKVTypes)
    for (int64_t capacity : {int64_t(3), int64_t(5000)}) {
      KVCacheConfig cfg;
      cfg.batch = 2; cfg.kv_heads = 3; cfg.capacity = capacity; cfg.head_dim = 64; cfg.dtype = dtype;
      const KVCache cache(cfg);
      SCOPED_TRACE(std::string(maskattn::kv_type_name(dtype)) + " capacity " + std::to_string(capacity));
      EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(cache.key_data()) % 64);
      EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(cache.value_data()) % 64);
    }
}

TEST(KVTypeTable, EachDtypesFactsAreWhatItsCacheDoes) {
  for (KVType t : maskattn::kKVTypes) {
    const maskattn::KVTypeInfo info = maskattn::kv_type_info(t);
    SCOPED_TRACE(info.name);
    KVCacheConfig cfg;
    cfg.capacity = 4;
    cfg.head_dim = 64;
    cfg.dtype = t;
    KVCache cache(cfg);
    // bits: a row of 64 values takes 64 bits / 8 bytes, plus a float32 scale per block of 32 if quantized.
    EXPECT_EQ(cache.byte_length(), 2 * 4 * (64 * info.bits / 8 + (info.quantized ? 2 * 4 : 0)));
    // raw_bits: the uint16_t append is taken exactly by the dtypes that say so, and stores those bits.
    const std::vector<uint16_t> bits(64, 0x3c00);
    const auto raw = maskattn::bhld(bits.data(), 1, 1, 1, 64);
    if (info.raw_bits) {
      ASSERT_EQ(info.bits, 16);
      cache.append(raw, raw);
      std::vector<float> expect(64, t == KVType::float16 ? 1.0f : maskattn::bfloat16_to_float(0x3c00));
      EXPECT_EQ(cache.read(0).key, expect);
    } else {
      EXPECT_THROW(cache.append(raw, raw), ArgumentError);
      EXPECT_EQ(cache.lengths()[0], 0);
    }
    // Automatic key rotation: on for q4 keys only (docs/semantics.md, "Key rotation").
    EXPECT_EQ(cache.keys_rotated(), t == KVType::q4);
  }
}

// ---------------------------------------------------------------------------------------------
// The shadow: what each sequence holds, as plain float rows
// ---------------------------------------------------------------------------------------------

// A value as a cache of this dtype stores it (the test's own rounding; a float dtype added to the
// table without its model here fails by name).
float stored(KVType dtype, float x) {
  if (dtype == KVType::float16) return float(half_value(nearest_half(x)));
  if (dtype == KVType::bfloat16) return bf16_value(nearest_bf16(x));
  if (dtype != KVType::float32) ADD_FAILURE() << "no rounding model for " << maskattn::kv_type_name(dtype);
  return x;
}

// The float dtypes (not quantized), which a cache compares with plain attention on exactly the
// values it stores: every such row of the table.
std::vector<KVType> float_dtypes() {
  std::vector<KVType> out;
  for (KVType t : maskattn_test::kv_types())
    if (!maskattn::kv_type_info(t).quantized) out.push_back(t);
  return out;
}

struct Shadow {
  int64_t B, H, D, Dv;
  KVType dtype;
  std::vector<std::vector<float>> k, v;  // [b]: positions x H x width (position-major)

  Shadow(int64_t b, int64_t h, int64_t d, int64_t dv, KVType t) : B(b), H(h), D(d), Dv(dv), dtype(t), k(b), v(b) {}
  int64_t length(int64_t b) const { return int64_t(k[size_t(b)].size()) / (H * D); }
  float store(float x) const { return stored(dtype, x); }
  // Appends counts[b] rows of bhld k [B, H, T, D], v [B, H, T, Dv].
  void append(const std::vector<float>& kin, const std::vector<float>& vin, int64_t T, const std::vector<int32_t>& counts) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < counts[size_t(b)]; ++t)
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t c = 0; c < D; ++c) k[size_t(b)].push_back(store(kin[size_t(((b * H + h) * T + t) * D + c)]));
          for (int64_t c = 0; c < Dv; ++c) v[size_t(b)].push_back(store(vin[size_t(((b * H + h) * T + t) * Dv + c)]));
        }
  }
  void truncate(const std::vector<int32_t>& lengths) {
    for (int64_t b = 0; b < B; ++b) {
      k[size_t(b)].resize(size_t(lengths[size_t(b)] * H * D));
      v[size_t(b)].resize(size_t(lengths[size_t(b)] * H * Dv));
    }
  }
  // Sequence b as a bhld [1, H, L, width] tensor.
  std::vector<float> tensor(int64_t b, bool keys) const {
    const int64_t w = keys ? D : Dv, L = length(b);
    const std::vector<float>& src = keys ? k[size_t(b)] : v[size_t(b)];
    std::vector<float> out(size_t(H * L * w));
    for (int64_t j = 0; j < L; ++j)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < w; ++c) out[size_t((h * L + j) * w + c)] = src[size_t((j * H + h) * w + c)];
    return out;
  }
};

class KVCacheTest : public TargetTest {
 protected:
  maskattn::Options options() const { return cache_options(); }

  // Checks cache.attend(q, opt) against the reference per sequence (window: the ring's rule).
  void check_attend(const KVCache& cache, const Shadow& shadow, int64_t Hq, int64_t Lq, Rng& rng,
                    maskattn::Options opt, const std::string& what) {
    SCOPED_TRACE(what);
    const KVCacheConfig& cfg = cache.config();
    const int64_t B = cfg.batch, D = cfg.head_dim, Dv = cfg.value_dim;
    std::vector<float> q(size_t(B * Hq * Lq * D)), out(size_t(B * Hq * Lq * Dv), -7.0f), lse(size_t(B * Hq * Lq));
    for (float& x : q) x = rng.uniform(-1, 1);
    maskattn::ExtraOutputs extra;
    extra.lse = lse.data();
    cache.attend(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(out.data(), B, Hq, Lq, Dv), opt, extra);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = shadow.length(b);
      ASSERT_EQ(L, cache.lengths()[size_t(b)]);
      const std::vector<float> kb = shadow.tensor(b, true), vb = shadow.tensor(b, false);
      const maskattn::Options ro = maskattn_test::cache_reference_options(opt, cfg.window);
      const float* qb = q.data() + b * Hq * Lq * D;
      auto run_ref = [&](maskattn::Precision prec) {
        return maskattn::reference_attention(maskattn::bhld(qb, 1, Hq, Lq, D), maskattn::bhld(kb.data(), 1, cfg.kv_heads, L, D),
                                             maskattn::bhld(vb.data(), 1, cfg.kv_heads, L, Dv), ro, prec);
      };
      const maskattn::ReferenceResult r64 = run_ref(maskattn::Precision::fp64), r32 = run_ref(maskattn::Precision::fp32);
      const std::vector<float> got(out.begin() + b * Hq * Lq * Dv, out.begin() + (b + 1) * Hq * Lq * Dv);
      EXPECT_TRUE(maskattn_test::compare_to_reference("O (sequence " + std::to_string(b) + ")", got, r64.out, r32.out,
                                                      {1, Hq, Lq, Dv}));
      const std::vector<float> got_lse(lse.begin() + b * Hq * Lq, lse.begin() + (b + 1) * Hq * Lq);
      maskattn_test::Tolerance lt;
      lt.floor = 4e-6;
      lt.cap = 0;
      lt.rel_floor = 1e-6;
      EXPECT_TRUE(maskattn_test::compare_to_reference("lse (sequence " + std::to_string(b) + ")", got_lse, r64.lse,
                                                      r32.lse, {1, Hq, Lq}, lt));
    }
  }

  static std::vector<float> random(Rng& rng, size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = rng.uniform(-1, 1);
    return x;
  }
};

// Ragged appends in several steps, truncate (rejected speculative tokens), re-append, reset;
// float32, float16 and bfloat16, GQA 4/2, one and three query rows, every fully-masked policy.
TEST_P(KVCacheTest, MatchesPlainAttentionThroughAGeneration) {
  for (KVType dtype : float_dtypes()) {
    const std::string label = maskattn::kv_type_name(dtype);
    Rng rng("KVCache/generation/" + label);
    KVCacheConfig cfg;
    cfg.batch = 2; cfg.kv_heads = 2; cfg.capacity = 600; cfg.head_dim = 24; cfg.value_dim = 20; cfg.dtype = dtype;
    KVCache cache(cfg);
    Shadow shadow(2, 2, 24, 20, dtype);
    const void* storage = cache.key_data();
    auto append = [&](int64_t T, std::vector<int32_t> counts) {
      const std::vector<float> k = random(rng, size_t(2 * 2 * T * 24)), v = random(rng, size_t(2 * 2 * T * 20));
      cache.append(maskattn::bhld(k.data(), 2, 2, T, 24), maskattn::bhld(v.data(), 2, 2, T, 20), counts);
      shadow.append(k, v, T, counts);
    };
    append(150, {150, 70});  // ragged prompt
    check_attend(cache, shadow, 4, 3, rng, options(), label + " after the prompt");
    for (int step = 0; step < 3; ++step) append(1, {1, 1});
    check_attend(cache, shadow, 4, 1, rng, options(), label + " after decode steps");
    append(4, {4, 2});  // speculative tokens...
    cache.truncate(std::vector<int32_t>{151, 72});  // ...partly rejected
    shadow.truncate({151, 72});
    append(2, {2, 0});
    check_attend(cache, shadow, 4, 2, rng, options(), label + " after truncate and re-append");
    append(400, {400, 400});  // long: several split-K chunks
    maskattn::Options o = options();
    const std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f};  // a Span: must outlive o
    o.alibi_slopes = slopes;
    o.softcap = 20.0f;
    check_attend(cache, shadow, 4, 1, rng, o, label + " long, ALiBi and softcap");
    EXPECT_EQ(storage, cache.key_data()) << "the cache grows in place";
    // Sequence 1 empty: its rows are fully masked; each policy answers for them.
    cache.truncate(std::vector<int32_t>{cache.lengths()[0], 0});
    shadow.truncate({cache.lengths()[0], 0});
    for (FullyMasked policy : {FullyMasked::zero, FullyMasked::nan, FullyMasked::uniform}) {
      o = options();
      o.fully_masked = policy;
      check_attend(cache, shadow, 4, 1, rng, o, label + " empty sequence, policy " + std::to_string(int(policy)));
    }
    o = options();
    o.causal = false;
    o.window = {5, -1};
    check_attend(cache, shadow, 4, 2, rng, o, label + " not causal, window");
    cache.reset();
    shadow.truncate({0, 0});
    EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{0, 0}));
    append(3, {3, 1});
    check_attend(cache, shadow, 4, 1, rng, options(), label + " after reset");
  }
}

// Head sizes models use (96, 128), with groups of 1 to 8 query heads per KV head: the decode kernel's register
// blocks (rows x keys in Q·Kᵀ, rows x column vectors in P·V) take every shape they have on the
// target, and on x86 the bfloat16 rows read in pair order (2W values per load, the query and the
// output columns permuted to match; on AVX-512 P·V reads pairs from 128 columns with 1 or 2 rows,
// 64 with 4, 32 with 8).
TEST_P(KVCacheTest, SixteenBitRowsAtModelHeadSizes) {
  if (target().kernel == maskattn::Kernel::prefill || target().kernel == maskattn::Kernel::prefill_split)
    GTEST_SKIP() << "the decode kernel's shapes (the prefill kernel's tiles are other tests' subject)";
  for (KVType dtype : float_dtypes())
    for (int64_t D : {int64_t(96), int64_t(128)})
      for (int64_t group : {int64_t(1), int64_t(2), int64_t(4), int64_t(8)}) {
        const std::string label = std::string(maskattn::kv_type_name(dtype)) + " D " + std::to_string(D) + " group " +
                                  std::to_string(group);
        Rng rng("KVCache/head-sizes/" + label);
        KVCacheConfig cfg;
        cfg.batch = 1; cfg.kv_heads = 2; cfg.capacity = 80; cfg.head_dim = D; cfg.dtype = dtype;
        KVCache cache(cfg);
        Shadow shadow(1, 2, D, D, dtype);
        const std::vector<float> k = random(rng, size_t(2 * 70 * D)), v = random(rng, size_t(2 * 70 * D));
        cache.append(maskattn::bhld(k.data(), 1, 2, 70, D), maskattn::bhld(v.data(), 1, 2, 70, D));
        shadow.append(k, v, 70, {70});
        check_attend(cache, shadow, 2 * group, 1, rng, options(), label);
      }
}

// A sliding-window ring: appends wrap around the capacity, and attention equals the full history
// with window [W - 1, 0]. Queries of several rows need capacity >= W + Lq - 1.
TEST_P(KVCacheTest, SlidingWindowRingWrapsAround) {
  for (KVType dtype : float_dtypes()) {
    Rng rng(std::string("KVCache/ring/") + maskattn::kv_type_name(dtype));
    KVCacheConfig cfg;
    cfg.batch = 2; cfg.kv_heads = 1; cfg.capacity = 100; cfg.head_dim = 16; cfg.dtype = dtype; cfg.window = 97;
    KVCache cache(cfg);
    Shadow shadow(2, 1, 16, 16, dtype);
    const int64_t value_bytes = dtype == KVType::float32 ? 4 : 2;
    EXPECT_EQ(cache.byte_length(), 2 * 1 * 100 * 32 * value_bytes);
    for (int step = 0; step < 6; ++step) {
      const int64_t T = step == 0 ? 130 : 37;  // the first append alone wraps the ring
      std::vector<int32_t> counts = {int32_t(T), int32_t(step % 2 ? T : T - 5)};
      const std::vector<float> k = random(rng, size_t(2 * T * 16)), v = random(rng, size_t(2 * T * 16));
      cache.append(maskattn::bhld(k.data(), 2, 1, T, 16), maskattn::bhld(v.data(), 2, 1, T, 16), counts);
      shadow.append(k, v, T, counts);
      check_attend(cache, shadow, 2, 4, rng, options(), "ring step " + std::to_string(step));
    }
    EXPECT_EQ(cache.byte_length(), 2 * 1 * 100 * 32 * value_bytes) << "memory stays O(capacity)";
    // Lq = 5 would reach a position already overwritten (capacity 100 < 97 + 5 - 1).
    std::vector<float> q(2 * 2 * 5 * 16, 0.5f), o(q.size(), -7.0f);
    const std::vector<float> before = o;
    try {
      cache.attend(maskattn::bhld(q.data(), 2, 2, 5, 16), maskattn::bhld(o.data(), 2, 2, 5, 16), options());
      ADD_FAILURE() << "expected an error";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), "q");
      EXPECT_NE(std::string(e.what()).find("overwritten"), std::string::npos) << e.what();
    }
    EXPECT_EQ(o, before) << "nothing written";
  }
}

// Raw 16-bit values in (IEEE halves, bfloat16 bits) equal the same values given as floats; a float32
// cache, and a cache whose keys and values differ in format, refuse them.
TEST_P(KVCacheTest, HalfInputEqualsRoundedFloatInput) {
  for (KVType dtype : {KVType::float16, KVType::bfloat16}) {
    SCOPED_TRACE(maskattn::kv_type_name(dtype));
    Rng rng(std::string("KVCache/half-input/") + maskattn::kv_type_name(dtype));
    KVCacheConfig cfg;
    cfg.batch = 1; cfg.kv_heads = 2; cfg.capacity = 80; cfg.head_dim = 8; cfg.dtype = dtype;
    KVCache from_floats(cfg), from_halves(cfg);
    const std::vector<float> k = random(rng, 2 * 70 * 8), v = random(rng, 2 * 70 * 8);
    std::vector<uint16_t> kh(k.size()), vh(v.size());
    auto bits = [&](float x) { return dtype == KVType::float16 ? nearest_half(x) : nearest_bf16(x); };
    for (size_t i = 0; i < k.size(); ++i) { kh[i] = bits(k[i]); vh[i] = bits(v[i]); }
    from_floats.append(maskattn::bhld(k.data(), 1, 2, 70, 8), maskattn::bhld(v.data(), 1, 2, 70, 8));
    from_halves.append(maskattn::bhld<const uint16_t>(kh.data(), 1, 2, 70, 8), maskattn::bhld<const uint16_t>(vh.data(), 1, 2, 70, 8));
    EXPECT_EQ(0, std::memcmp(from_floats.key_data(), from_halves.key_data(), kh.size() * 2));
    EXPECT_EQ(0, std::memcmp(from_floats.value_data(), from_halves.value_data(), vh.size() * 2));
    std::vector<float> q = random(rng, 4 * 8), o1(4 * 8), o2(4 * 8);
    from_floats.attend(maskattn::bhld(q.data(), 1, 4, 1, 8), maskattn::bhld(o1.data(), 1, 4, 1, 8), options());
    from_halves.attend(maskattn::bhld(q.data(), 1, 4, 1, 8), maskattn::bhld(o2.data(), 1, 4, 1, 8), options());
    EXPECT_EQ(o1, o2);
    cfg.dtype = KVType::float32;
    KVCache f32(cfg);
    EXPECT_THROW(f32.append(maskattn::bhld<const uint16_t>(kh.data(), 1, 2, 70, 8),
                            maskattn::bhld<const uint16_t>(vh.data(), 1, 2, 70, 8)),
                 ArgumentError);
    cfg.dtype = KVType::float16;
    cfg.value_dtype = KVType::bfloat16;
    KVCache mixed(cfg);
    EXPECT_THROW(mixed.append(maskattn::bhld<const uint16_t>(kh.data(), 1, 2, 70, 8),
                              maskattn::bhld<const uint16_t>(vh.data(), 1, 2, 70, 8)),
                 ArgumentError);
    EXPECT_EQ(mixed.lengths()[0], 0);
  }
}

// NaN in a cache's unused capacity or beyond a sequence's length never reaches the output.
TEST_P(KVCacheTest, UnusedCapacityNeverLeaks) {
  Rng rng("KVCache/unused");
  KVCacheConfig cfg;
  cfg.batch = 2; cfg.kv_heads = 1; cfg.capacity = 300; cfg.head_dim = 16;
  KVCache cache(cfg);
  Shadow shadow(2, 1, 16, 16, KVType::float32);
  // Fill everything with NaN, then roll back: the capacity now holds NaN garbage.
  std::vector<float> nan(2 * 300 * 16, maskattn_test::kNaN);
  cache.append(maskattn::bhld(nan.data(), 2, 1, 300, 16), maskattn::bhld(nan.data(), 2, 1, 300, 16));
  cache.truncate(std::vector<int32_t>{0, 0});
  const std::vector<float> k = random(rng, 2 * 200 * 16), v = random(rng, 2 * 200 * 16);
  cache.append(maskattn::bhld(k.data(), 2, 1, 200, 16), maskattn::bhld(v.data(), 2, 1, 200, 16), std::vector<int32_t>{200, 65});
  shadow.append(k, v, 200, {200, 65});
  for (FullyMasked policy : {FullyMasked::zero, FullyMasked::uniform}) {
    maskattn::Options o = options();
    o.fully_masked = policy;
    check_attend(cache, shadow, 2, 3, rng, o, "NaN beyond the lengths");
  }
}

TEST_P(KVCacheTest, AppendPastCapacityChangesNothing) {
  Rng rng("KVCache/capacity");
  KVCacheConfig cfg;
  cfg.batch = 2; cfg.kv_heads = 1; cfg.capacity = 10; cfg.head_dim = 8;
  KVCache cache(cfg);
  const std::vector<float> k = random(rng, 2 * 8 * 8), v = random(rng, 2 * 8 * 8);
  cache.append(maskattn::bhld(k.data(), 2, 1, 8, 8), maskattn::bhld(v.data(), 2, 1, 8, 8), std::vector<int32_t>{8, 3});
  const std::vector<float> q = random(rng, 2 * 1 * 8);
  std::vector<float> before(16), after(16);
  cache.attend(maskattn::bhld(q.data(), 2, 1, 1, 8), maskattn::bhld(before.data(), 2, 1, 1, 8), options());
  std::vector<float> k2 = random(rng, 2 * 3 * 8), v2 = random(rng, 2 * 3 * 8);
  try {
    cache.append(maskattn::bhld(k2.data(), 2, 1, 3, 8), maskattn::bhld(v2.data(), 2, 1, 3, 8));
    ADD_FAILURE() << "expected an error";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "sequence[0]");
    EXPECT_NE(std::string(e.what()).find("capacity is 10"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{8, 3}));
  cache.attend(maskattn::bhld(q.data(), 2, 1, 1, 8), maskattn::bhld(after.data(), 2, 1, 1, 8), options());
  EXPECT_EQ(before, after) << "nothing was written, not even to sequence 1, which had room";
}

// Every float16 and bfloat16 value as a V element, through each target's conversion of a 16-bit
// V row (SIMD128 has a short one that leaves exponent 31 to a second pass): the scores of a KV
// head's query heads pick one key (0 against -2^40: weights exactly 1 and 0), so their output rows
// are that key's V row, exactly: infinities, NaN, subnormals and the largest values included. (The
// other keys' V rows are 0: a weight 0 meeting an infinity would make NaN.) GQA 8/2 with D = 128:
// the rows go 8 values per load, 4 query rows per K and V row.
TEST_P(KVCacheTest, EverySixteenBitValueReadsBackThroughPV) {
  constexpr int64_t B = 16, Hkv = 2, G = 4, Hq = Hkv * G, L = 64, D = 128;
  auto key_of = [](int64_t kv) { return kv % 4 * 16 + 5; };  // the key the heads of KV head kv pick
  for (KVType dtype : {KVType::float16, KVType::bfloat16}) {
    SCOPED_TRACE(maskattn::kv_type_name(dtype));
    auto value = [&](uint16_t bits) { return dtype == KVType::float16 ? half_value(bits) : double(bf16_value(bits)); };
    const uint16_t zero = 0, minus_one = dtype == KVType::float16 ? 0xbc00 : 0xbf80;
    KVCacheConfig cfg;
    cfg.batch = B; cfg.kv_heads = Hkv; cfg.capacity = L; cfg.head_dim = D; cfg.dtype = dtype;
    // Key j is -1 but in column j: q = 2^40 e_m scores key m 0 and every other key -2^40.
    std::vector<uint16_t> k(B * Hkv * L * D);
    for (int64_t r = 0; r < B * Hkv * L; ++r)
      for (int64_t c = 0; c < D; ++c) k[r * D + c] = c == r % L ? zero : minus_one;
    std::vector<float> q(B * Hq * D, 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) q[(b * Hq + h) * D + key_of(b * Hkv + h / G)] = 0x1p40f;
    maskattn::Options o = options();
    o.scale = 1.0f;
    for (uint32_t base = 0; base < 0x10000; base += B * Hkv * D) {
      std::vector<uint16_t> v(k.size(), zero);
      for (int64_t kv = 0; kv < B * Hkv; ++kv)
        for (int64_t c = 0; c < D; ++c) v[(kv * L + key_of(kv)) * D + c] = uint16_t(base + kv * D + c);
      KVCache cache(cfg);
      cache.append(maskattn::bhld<const uint16_t>(k.data(), B, Hkv, L, D), maskattn::bhld<const uint16_t>(v.data(), B, Hkv, L, D));
      std::vector<float> out(q.size());
      cache.attend(maskattn::bhld(q.data(), B, Hq, 1, D), maskattn::bhld(out.data(), B, Hq, 1, D), o);
      for (int64_t i = 0; i < B * Hq * D; ++i) {
        const uint16_t bits = uint16_t(base + (i / (G * D)) * D + i % D);  // query head i / D of KV head i / (G * D)
        const double want = value(bits);
        if (std::isnan(want)) ASSERT_TRUE(std::isnan(out[i])) << std::hex << "value bits " << bits << ": " << out[i];
        else ASSERT_EQ(double(out[i]), want) << std::hex << "value bits " << bits;
      }
    }
  }
}

// The same for float16 keys, through Q·Kᵀ: every half of exponent 31 or 0 (infinities, NaN,
// subnormals, zeros) and every 61st other one as key 0's element in one column (the others 0), the
// query 1 there: key 0 scores 2^24 times the half (subnormals become the integers 1..1023) against
// 7 keys scoring 0, and V is 1 for key 0, 0 for the rest: the output is key 0's weight,
// 1 / (1 + 7 e^-s), NaN for a NaN or +infinity score, 0 for -infinity.
TEST_P(KVCacheTest, SpecialAndSubnormalHalvesScoreAsTheirValue) {
  constexpr int64_t B = 8, Hkv = 2, G = 4, Hq = Hkv * G, L = 8, D = 128;
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t e = (h >> 10) & 0x1f;
    if (e == 31 || e == 0 || h % 61 == 0) halves.push_back(uint16_t(h));
  }
  KVCacheConfig cfg;
  cfg.batch = B; cfg.kv_heads = Hkv; cfg.capacity = L; cfg.head_dim = D; cfg.dtype = KVType::float16;
  maskattn::Options o = options();
  o.scale = 0x1p24f;
  auto column_of = [](int64_t kv) { return kv * 37 % D; };  // a different load and lane per sequence and head
  std::vector<uint16_t> v(B * Hkv * L * D, 0);
  for (int64_t kv = 0; kv < B * Hkv; ++kv)
    for (int64_t c = 0; c < D; ++c) v[kv * L * D + c] = 0x3c00;  // key 0: 1.0
  std::vector<float> q(B * Hq * D, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) q[(b * Hq + h) * D + column_of(b * Hkv + h / G)] = 1.0f;
  for (size_t first = 0; first < halves.size(); first += B * Hkv) {
    std::vector<uint16_t> k(v.size(), 0);
    for (int64_t kv = 0; kv < B * Hkv; ++kv)
      k[kv * L * D + column_of(kv)] = halves[std::min(halves.size() - 1, first + size_t(kv))];
    KVCache cache(cfg);
    cache.append(maskattn::bhld<const uint16_t>(k.data(), B, Hkv, L, D), maskattn::bhld<const uint16_t>(v.data(), B, Hkv, L, D));
    std::vector<float> out(q.size());
    cache.attend(maskattn::bhld(q.data(), B, Hq, 1, D), maskattn::bhld(out.data(), B, Hq, 1, D), o);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kv = b * Hkv + h / G;
        const uint16_t bits = k[kv * L * D + column_of(kv)];
        const double s = 0x1p24 * half_value(bits);
        const double want = std::isnan(s) || s == INFINITY ? NAN : 1.0 / (1.0 + 7.0 * std::exp(-s));
        for (int64_t c = 0; c < D; ++c) {
          const float got = out[(b * Hq + h) * D + c];
          if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << std::hex << "key bits " << bits << ": " << got;
          else ASSERT_NEAR(got, want, 1e-6) << std::hex << "key bits " << bits;
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, KVCacheTest, ::testing::ValuesIn(maskattn_test::kernel_target_params()),
                         maskattn_test::TargetParamName());

// ---------------------------------------------------------------------------------------------
// Bad input: each names the argument; nothing changes.
// ---------------------------------------------------------------------------------------------

using maskattn_test::expect_argument_error;

TEST(KVCacheErrors, ConfigurationFieldsAreNamed) {
  auto make = [](std::function<void(KVCacheConfig&)> change) {
    return [change] {
      KVCacheConfig c;
      c.batch = 1; c.kv_heads = 1; c.capacity = 4; c.head_dim = 8;
      change(c);
      KVCache cache(c);
    };
  };
  expect_argument_error(make([](KVCacheConfig& c) { c.batch = 0; }), "batch");
  expect_argument_error(make([](KVCacheConfig& c) { c.kv_heads = -1; }), "kv_heads");
  expect_argument_error(make([](KVCacheConfig& c) { c.capacity = 0; }), "capacity");
  expect_argument_error(make([](KVCacheConfig& c) { c.capacity = int64_t(1) << 24; }), "capacity");
  expect_argument_error(make([](KVCacheConfig& c) { c.head_dim = 0; }), "head_dim");
  expect_argument_error(make([](KVCacheConfig& c) { c.value_dim = -2; }), "value_dim");
  expect_argument_error(make([](KVCacheConfig& c) { c.dtype = static_cast<KVType>(7); }), "dtype", true);
  expect_argument_error(make([](KVCacheConfig& c) { c.window = -1; }), "window");
  expect_argument_error(make([](KVCacheConfig& c) { c.window = 5; }), "capacity");  // capacity 4 < window 5
  expect_argument_error(make([](KVCacheConfig& c) { c.batch = int64_t(1) << 40; c.capacity = 1 << 20; }), "capacity");
}

TEST(KVCacheErrors, MisuseIsNamedAndChangesNothing) {
  KVCacheConfig c;
  c.batch = 2; c.kv_heads = 2; c.capacity = 16; c.head_dim = 4;
  KVCache cache(c);
  std::vector<float> k(2 * 2 * 3 * 4, 0.25f), q(2 * 2 * 1 * 4, 0.5f), o(q.size());
  cache.append(maskattn::bhld(k.data(), 2, 2, 3, 4), maskattn::bhld(k.data(), 2, 2, 3, 4));
  expect_argument_error([&] { cache.append(maskattn::bhld(k.data(), 2, 1, 6, 4), maskattn::bhld(k.data(), 2, 1, 6, 4)); }, "k");
  expect_argument_error([&] { cache.append(maskattn::bhld(k.data(), 2, 2, 3, 4), maskattn::bhld(k.data(), 2, 2, 2, 4)); }, "v");
  expect_argument_error([&] { cache.append(maskattn::bhld(k.data(), 2, 2, 3, 4), maskattn::bhld(k.data(), 2, 2, 3, 4), std::vector<int32_t>{1}); }, "counts");
  expect_argument_error([&] { cache.append(maskattn::bhld(k.data(), 2, 2, 3, 4), maskattn::bhld(k.data(), 2, 2, 3, 4), std::vector<int32_t>{1, 4}); }, "counts[1]");
  expect_argument_error([&] { cache.append(maskattn::bhld(k.data(), 2, 2, 3, 4, 10), maskattn::bhld(k.data(), 2, 2, 3, 4)); }, "k");
  expect_argument_error([&] { cache.truncate(std::vector<int32_t>{4, 1}); }, "lengths[0]");
  expect_argument_error([&] { cache.truncate(std::vector<int32_t>{-1, 1}); }, "lengths[0]");
  expect_argument_error([&] { cache.truncate(std::vector<int32_t>{1}); }, "lengths");
  maskattn::Options with_lengths = KVCache::default_options();
  std::vector<int32_t> kl = {3, 3};
  with_lengths.key_lengths = kl;
  expect_argument_error([&] { cache.attend(maskattn::bhld(q.data(), 2, 2, 1, 4), maskattn::bhld(o.data(), 2, 2, 1, 4), with_lengths); }, "key_lengths");
  expect_argument_error([&] { cache.attend(maskattn::bhld(q.data(), 2, 3, 1, 4), maskattn::bhld(o.data(), 2, 3, 1, 4)); }, "q");
  expect_argument_error([&] { cache.attend(maskattn::bhld(q.data(), 1, 2, 1, 4), maskattn::bhld(o.data(), 1, 2, 1, 4)); }, "q");
  EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{3, 3}));
}

}  // namespace
