// Head sizes: one decode step over a resident GQA cache (1 x 32/8 query/KV heads) and one causal
// prefill call (1 x 8 heads x 1024 x 1024) at D = Dv = 64, 128, 256 and 512 and at K/V head sizes
// that differ (192/128 and 576/512, as DeepSeek's layers use), with float32 and q8 caches. Every
// cache holds the same bytes (2^20 / (D + Dv) keys: 4096 at D = 128, 32 MiB in float32) and four
// of each rotate, so each step reads from DRAM whatever D is. Interleaved: each repetition measures
// every case in a new random order. Prints per case ms, ns per key and KV head and GB/s of K/V read
// (decode), GFLOP/s (prefill), and each relative to D = 128: the work per key grows with D + Dv, so
// a kernel that keeps up shows flat GB/s and GFLOP/s across head sizes.
//
//   maskattn_headdim_bench [--quick] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

#include "stats.hpp"

namespace {

using maskattn::KVType;

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Size {
  int D, Dv;
};
const Size kSizes[] = {{64, 64}, {128, 128}, {256, 256}, {512, 512}, {192, 128}, {576, 512}};
const KVType kDtypes[] = {KVType::float32, KVType::q8};
constexpr int kHq = 32, kHkv = 8;  // decode
int keys_for(const Size& s) { return (1 << 20) / (s.D + s.Dv); }
constexpr int kHeads = 8, kL = 1024;             // prefill

std::vector<float> random_values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = g(rng);
  return x;
}

struct DecodeCase {
  Size s;
  KVType dtype;
  std::vector<maskattn::KVCache> caches;  // copies that rotate
  std::vector<float> q, out;
  std::vector<double> times;
};

struct PrefillCase {
  Size s;
  std::vector<float> q, k, v, out;
  std::vector<double> times;
};

}  // namespace

int main(int argc, char** argv) {
  bench::QuickThreads args;
  if (!bench::parse_quick_threads(argc, argv, "maskattn_headdim_bench", args)) return 2;
  const bool quick = args.quick;
  const int threads = args.threads;
  std::mt19937 rng(11);
  const int reps = quick ? 7 : 21, copies = 4;
  std::vector<DecodeCase> decode;
  for (const Size& s : kSizes)
    for (KVType t : kDtypes) {
      DecodeCase c{s, t, {}, random_values(rng, size_t(kHq) * s.D), std::vector<float>(size_t(kHq) * s.Dv), {}};
      const int keys = keys_for(s);
      const std::vector<float> k = random_values(rng, size_t(kHkv) * keys * s.D), v = random_values(rng, size_t(kHkv) * keys * s.Dv);
      for (int n = 0; n < copies; ++n) {
        maskattn::KVCacheConfig cfg;
        cfg.kv_heads = kHkv;
        cfg.capacity = keys;
        cfg.head_dim = s.D;
        cfg.value_dim = s.Dv;
        cfg.dtype = t;
        c.caches.emplace_back(cfg);
        c.caches.back().append(maskattn::bhld(k.data(), 1, kHkv, keys, s.D), maskattn::bhld(v.data(), 1, kHkv, keys, s.Dv));
      }
      decode.push_back(std::move(c));
    }
  std::vector<PrefillCase> prefill;
  for (const Size& s : kSizes) {
    const size_t n = size_t(kHeads) * kL;
    prefill.push_back({s, random_values(rng, n * s.D), random_values(rng, n * s.D), random_values(rng, n * s.Dv),
                       std::vector<float>(n * s.Dv), {}});
  }
  const size_t n_cases = decode.size() + prefill.size();
  std::vector<size_t> order(n_cases);
  for (size_t i = 0; i < n_cases; ++i) order[i] = i;
  maskattn::Options causal;
  causal.causal = true;
  causal.threads = threads;
  maskattn::Options step = maskattn::KVCache::default_options();
  step.threads = threads;
  for (int r = 0; r < reps; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      if (i < decode.size()) {
        DecodeCase& c = decode[i];
        const maskattn::KVCache& cache = c.caches[size_t(r) % c.caches.size()];
        const double t0 = seconds();
        cache.attend(maskattn::bhld(c.q.data(), 1, kHq, 1, c.s.D), maskattn::bhld(c.out.data(), 1, kHq, 1, c.s.Dv), step);
        c.times.push_back(seconds() - t0);
      } else {
        PrefillCase& c = prefill[i - decode.size()];
        const double t0 = seconds();
        maskattn::attention(maskattn::bhld(c.q.data(), 1, kHeads, kL, c.s.D), maskattn::bhld(c.k.data(), 1, kHeads, kL, c.s.D),
                            maskattn::bhld(c.v.data(), 1, kHeads, kL, c.s.Dv), maskattn::bhld(c.out.data(), 1, kHeads, kL, c.s.Dv),
                            causal);
        c.times.push_back(seconds() - t0);
      }
    }
    std::fprintf(stderr, "  %d/%d repetitions\r", r + 1, reps);
  }
  std::fprintf(stderr, "\n");
  std::printf("head sizes (%s, %d thread%s), medians of %d\n", maskattn::target_name(maskattn::best_target()), threads,
              threads == 1 ? "" : "s", reps);
  std::printf("decode step, 1 x %d/%d heads x 2^20 / (D + Dv) keys:\n  %-9s %-5s %6s %9s %12s %8s %10s\n", kHq, kHkv, "D/Dv",
              "dtype", "keys", "ms", "ns/key/head", "GB/s", "vs D=128");
  for (KVType t : kDtypes) {
    double base = 0;
    for (const DecodeCase& c : decode)
      if (c.dtype == t && c.s.D == 128) base = double(c.caches[0].byte_length()) / bench::median(c.times);
    for (const DecodeCase& c : decode) {
      if (c.dtype != t) continue;
      const double sec = bench::median(c.times), gbs = double(c.caches[0].byte_length()) / sec;
      std::printf("  %4d/%-4d %-5s %6d %9.3f %12.2f %8.1f %9.2fx\n", c.s.D, c.s.Dv, maskattn::kv_type_name(t), keys_for(c.s),
                  sec * 1e3, sec * 1e9 / (double(keys_for(c.s)) * kHkv), gbs * 1e-9, gbs / base);
    }
  }
  std::printf("prefill, causal, 1 x %d heads x %d x %d:\n  %-9s %9s %9s %10s\n", kHeads, kL, kL, "D/Dv", "ms", "GFLOP/s",
              "vs D=128");
  auto gflops = [](const PrefillCase& c) {
    return 2.0 * kHeads * (double(kL) * (kL + 1) / 2) * double(c.s.D + c.s.Dv) / bench::median(c.times) * 1e-9;
  };
  double base = 0;
  for (const PrefillCase& c : prefill)
    if (c.s.D == 128) base = gflops(c);
  for (const PrefillCase& c : prefill)
    std::printf("  %4d/%-4d %9.3f %9.1f %9.2fx\n", c.s.D, c.s.Dv, bench::median(c.times) * 1e3, gflops(c), gflops(c) / base);
}
