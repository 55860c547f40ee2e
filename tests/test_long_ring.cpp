// A sliding-window cache (a ring) is endless generation in bounded memory (docs/kv-cache.md): it
// holds its slots while its positions count on to 2^31 - 1 (maskattn::kMaxRingLength). Here, for
// every cache dtype with RoPE, sink tokens and GQA, two sequences 777 tokens apart are taken past
// 2^24 tokens seen (2^22 in WebAssembly, where the suite runs under Node) and attended every few
// thousand tokens on every target and kernel, against a float64 reference over the window the
// cache holds (read()), with the cache's memory and the process's flat. Past 2^31 - 1 an append is
// an error naming the sequence, and nothing is written.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__EMSCRIPTEN__)
#include <emscripten/heap.h>
#endif

#include "test_support.hpp"

namespace {

using maskattn::KVCache;
using maskattn::KVCacheConfig;
using maskattn::KVType;
using maskattn::Rope;
using maskattn_test::Rng;

#if defined(__EMSCRIPTEN__)
constexpr int64_t kPast = int64_t(1) << 22;
#else
constexpr int64_t kPast = int64_t(1) << 24;
#endif
constexpr int64_t kB = 2, kHkv = 2, kHq = 4, kD = 128, kDv = 72, kWindow = 40, kSinks = 3, kMaxLq = 5;
constexpr int64_t kApart = 777;  // sequence 1 trails sequence 0 by this many tokens

// Bytes the process holds: resident memory natively, the heap in WebAssembly (it only grows).
int64_t process_bytes() {
#if defined(__EMSCRIPTEN__)
  return int64_t(emscripten_get_heap_size());
#else
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? int64_t(resident) * 4096 : -1;
#endif
}

// The query row rotated at `pos` in double (the rope's own definition, docs/semantics.md).
std::vector<double> rotated(const float* q, const Rope& r, int64_t pos) {
  std::vector<double> out(q, q + kD);
  const int64_t dims = r.dims ? r.dims : kD, half = dims / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = double(pos + r.offset) * std::pow(r.theta, -double(2 * i) / double(dims));
    const int64_t x = r.layout == maskattn::RopeLayout::interleaved ? 2 * i : i;
    const int64_t y = r.layout == maskattn::RopeLayout::interleaved ? 2 * i + 1 : i + half;
    out[size_t(x)] = double(q[x]) * std::cos(a) - double(q[y]) * std::sin(a);
    out[size_t(y)] = double(q[x]) * std::sin(a) + double(q[y]) * std::cos(a);
  }
  return out;
}

// attend(q) against the float64 reference over what read() says sequence b holds: sink rows at
// positions 0.., then the window from `start`; query i at lengths[b] - Lq + i sees positions
// <= its own, among them the sink tokens and the newest kWindow.
void check_attend(const KVCache& cache, Rng& rng, int64_t Lq, maskattn::Options opt, const std::string& what) {
  SCOPED_TRACE(what);
  const KVCacheConfig& cfg = cache.config();
  std::vector<float> q(size_t(kB * kHq * Lq * kD)), out(size_t(kB * kHq * Lq * kDv), -7.0f);
  for (float& x : q) x = rng.uniform(-1, 1);
  cache.attend(maskattn::bhld(q.data(), kB, kHq, Lq, kD), maskattn::bhld(out.data(), kB, kHq, Lq, kDv), opt);
  const bool quantized_keys = *cfg.key_dtype == KVType::q8 || *cfg.key_dtype == KVType::q4;
  const bool quantized_values = *cfg.value_dtype == KVType::q8 || *cfg.value_dtype == KVType::q4;
  const double scale = 1.0 / std::sqrt(double(kD));
  for (int64_t b = 0; b < kB; ++b) {
    const KVCache::Contents c = cache.read(b);
    const int64_t n = c.sinks + c.length, len = cache.lengths()[size_t(b)];
    ASSERT_EQ(c.start + c.length, len);
    ASSERT_LE(n, cfg.capacity);
    double vmax = 0;
    for (float x : c.value) vmax = std::max(vmax, std::fabs(double(x)));
    const bool integer_pv = quantized_values && maskattn_test::integer_pv_target(opt.target == maskattn::Target::automatic
                                                                                    ? maskattn::best_target()
                                                                                    : opt.target);
    const double pv_rounding = integer_pv ? maskattn_test::integer_pv_rounding(vmax) : 0.0;
    for (int64_t h = 0; h < kHq; ++h) {
      const int64_t hk = h / (kHq / kHkv);
      const float* key = c.key.data() + hk * n * kD;
      const float* value = c.value.data() + hk * n * kDv;
      for (int64_t i = 0; i < Lq; ++i) {
        const int64_t pos = len - Lq + i;
        const std::vector<double> qr = rotated(q.data() + ((b * kHq + h) * Lq + i) * kD, *cfg.rope, pos);
        std::vector<double> logit(size_t(n), -INFINITY);
        double m = -INFINITY, k_norm_max = 0;
        for (int64_t r = 0; r < n; ++r) {
          const int64_t at = r < c.sinks ? r : c.start + (r - c.sinks);
          if (at > pos || (at >= kSinks && at <= pos - kWindow)) continue;
          double s = 0, kn = 0;
          for (int64_t d = 0; d < kD; ++d) {
            s += qr[size_t(d)] * double(key[r * kD + d]);
            kn += double(key[r * kD + d]) * double(key[r * kD + d]);
          }
          logit[size_t(r)] = s * scale;
          m = std::max(m, logit[size_t(r)]);
          k_norm_max = std::max(k_norm_max, std::sqrt(kn));
        }
        ASSERT_GT(m, -INFINITY) << "every row attends its own position";
        double l = 0;
        for (double& x : logit) l += (x = std::exp(x - m));
        double q_norm = 0;
        for (double x : qr) q_norm += x * x;
        const double bound = quantized_keys
                                 ? maskattn_test::quantized_query_bound(scale, std::sqrt(q_norm), kD, k_norm_max, vmax, pv_rounding)
                                 : 1e-5 * std::max(1.0, vmax) + pv_rounding;
        for (int64_t e = 0; e < kDv; ++e) {
          double want = 0;
          for (int64_t r = 0; r < n; ++r) want += logit[size_t(r)] / l * double(value[r * kDv + e]);
          const float got = out[size_t(((b * kHq + h) * Lq + i) * kDv + e)];
          ASSERT_LE(std::fabs(double(got) - want), bound)
              << "sequence " << b << " (" << len << " tokens seen) head " << h << " row " << i << " column " << e;
        }
      }
    }
  }
}

TEST(LongRing, EveryDtypePastTwoToThe24TokensWithRopeAndSinkTokens) {
  for (KVType dtype : maskattn_test::kv_types()) {
    const std::string name = maskattn::kv_type_name(dtype);
    SCOPED_TRACE("dtype " + name);
    Rng rng("long-ring/" + name);
    KVCacheConfig cfg;
    cfg.batch = kB;
    cfg.kv_heads = kHkv;
    cfg.head_dim = kD;
    cfg.value_dim = kDv;
    cfg.window = kWindow;
    cfg.sink_tokens = kSinks;
    cfg.capacity = kWindow + kSinks + kMaxLq - 1;
    cfg.dtype = dtype;
    cfg.rope = Rope{10000, 0, maskattn::RopeLayout::halves, 12345};
    KVCache cache(cfg);
    const int64_t bytes = cache.byte_length();

    // Appends of T tokens; only the rows a ring keeps (its newest and its sink tokens) get fresh
    // values, the rest are never stored. An append that no check reads before the next one
    // overwrites its rows may repeat the last values (`fresh` false).
    std::vector<float> k, v;
    auto append = [&](int64_t T, std::vector<int32_t> counts, bool fresh = true) {
      k.resize(size_t(kB * kHkv * T * kD));
      v.resize(size_t(kB * kHkv * T * kDv));
      auto fill = [&](int64_t bh, int64_t t) {
        for (int64_t d = 0; d < kD; ++d) k[size_t((bh * T + t) * kD + d)] = rng.uniform(-1, 1);
        for (int64_t d = 0; d < kDv; ++d) v[size_t((bh * T + t) * kDv + d)] = rng.uniform(-1, 1);
      };
      if (fresh)
        for (int64_t bh = 0; bh < kB * kHkv; ++bh) {
          for (int64_t t = 0; t < std::min(kSinks, T); ++t) fill(bh, t);
          for (int64_t t = std::max(kSinks, T - cfg.capacity); t < T; ++t) fill(bh, t);
        }
      cache.append(maskattn::bhld<const float>(k.data(), kB, kHkv, T, kD),
                   maskattn::bhld<const float>(v.data(), kB, kHkv, T, kDv), counts);
    };
    maskattn::Options automatic = KVCache::default_options();

    // To a few thousand tokens short of 2^24 (2^22) in appends of 16,384, attended after every
    // eighth, the appends between repeating their values (the checks and the random fills were
    // four fifths of this test's time: 3 s natively, 46 s under qemu).
    append(16, {16, 16});
    append(kApart, {int32_t(kApart), 0});
    constexpr int64_t kLong = int64_t(1) << 14;
    for (int64_t appends = 0; cache.lengths()[0] + kLong < kPast - 6000; ++appends) {
      const bool checked = appends % 8 == 7;
      append(kLong, {}, checked);
      if (!checked) continue;
      check_attend(cache, rng, 1, automatic, "automatic, 1 row, " + std::to_string(cache.lengths()[0]) + " tokens");
      if (HasFatalFailure()) return;
    }
    const int64_t before = process_bytes();
    // Across 2^24 in appends of 3001 tokens, attended after each on every target and kernel.
    for (int step = 0; cache.lengths()[1] < kPast + 6000; ++step) {
      append(3001, {});
      for (const maskattn_test::KernelTarget& t : maskattn_test::kernel_target_params()) {
        if (!maskattn::target_available(t.target)) continue;
        maskattn::Options o = automatic;
        o.target = t.target;
        o.kernel = t.kernel;
        const int64_t Lq = step % 2 ? kMaxLq : 1;
        check_attend(cache, rng, Lq, o, maskattn_test::target_label(t) + ", " + std::to_string(Lq) + " rows, " +
                                            std::to_string(cache.lengths()[0]) + " tokens");
        if (HasFatalFailure()) return;
      }
    }
    EXPECT_GT(cache.lengths()[1], kPast);
    EXPECT_EQ(cache.lengths()[0] - cache.lengths()[1], kApart);
    EXPECT_EQ(cache.byte_length(), bytes) << "a ring's storage is its slots";
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(MASKATTN_SANITIZER_RUNTIME)  // (their allocators keep freed memory)
    const int64_t after = process_bytes();
    EXPECT_LE(after - before, int64_t(16) << 20) << "the process grew from " << before << " to " << after << " bytes";
#endif
  }
}

// Positions are int32: a ring may see 2^31 - 1 tokens, and the append that would pass it is an
// error naming the sequence, with nothing written. Long appends cost what the ring keeps.
TEST(LongRing, AppendPastTheLastPositionIsNamedAndWritesNothing) {
  KVCacheConfig cfg;
  cfg.head_dim = 1;
  cfg.window = 2;
  cfg.capacity = 3;
  cfg.sink_tokens = 1;
  KVCache cache(cfg);
  EXPECT_EQ(maskattn::max_ring_length(), maskattn::kMaxRingLength);
  const int64_t T = int64_t(1) << 22;
  std::vector<float> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) x[size_t(t)] = float(t % 1000);
  const auto view = [&](int64_t n) { return maskattn::bhld<const float>(x.data(), 1, 1, n, 1); };
  while (cache.lengths()[0] + T <= maskattn::kMaxRingLength) cache.append(view(T), view(T));
  const int64_t rest = maskattn::kMaxRingLength - cache.lengths()[0];
  cache.append(view(rest), view(rest));
  ASSERT_EQ(cache.lengths()[0], maskattn::kMaxRingLength);
  const KVCache::Contents held = cache.read(0);
  maskattn_test::expect_argument_error([&] { cache.append(view(1), view(1)); }, "sequence[0]");
  try {
    cache.append(view(1), view(1));
  } catch (const maskattn::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("2147483647"), std::string::npos) << e.what();
  }
  const KVCache::Contents again = cache.read(0);
  EXPECT_EQ(cache.lengths()[0], maskattn::kMaxRingLength);
  EXPECT_EQ(again.key, held.key);
  EXPECT_EQ(again.value, held.value);
  EXPECT_EQ(held.key, (std::vector<float>{0, float((rest - 2) % 1000), float((rest - 1) % 1000)}));
  // The last position attends: its sink token and the newest two.
  const float q = 1;
  float o = -1;
  cache.attend(maskattn::bhld<const float>(&q, 1, 1, 1, 1), maskattn::bhld(&o, 1, 1, 1, 1));
  EXPECT_TRUE(std::isfinite(o));
}

}  // namespace
