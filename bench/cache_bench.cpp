// Native KV-cache benchmark: one decode step (attend one query per head over the cache) of a
// float32 cache against a float16 cache, GQA 1 x 32/8 x 1 x 4096 x 128 by default, at 1 and 2
// threads, interleaved (each repetition measures every (dtype, threads) pair in a new random
// order; four caches of each dtype rotate so K/V never come from cache), medians.
//
//   maskattn_cache_bench [--quick] [--length L] [--kv-heads H] [--heads HQ] [--dim D]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

#include "probes.hpp"

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int L = 4096, Hkv = 8, Hq = 32, D = 128;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&] { return a + 1 < argc ? std::atoi(argv[++a]) : 0; };
    if (arg == "--quick") quick = true;
    else if (arg == "--length") L = value();
    else if (arg == "--kv-heads") Hkv = value();
    else if (arg == "--heads") Hq = value();
    else if (arg == "--dim") D = value();
    else {
      std::fprintf(stderr, "usage: maskattn_cache_bench [--quick] [--length L] [--kv-heads H] [--heads HQ] [--dim D]\n");
      return 2;
    }
  }
  const int copies = 4, reps = quick ? 15 : 60;
  std::fprintf(stderr, "filling %d float32 and %d float16 caches of %d positions...\n", copies, copies, L);
  std::vector<maskattn::KVCache> caches;  // [copy * 2 + dtype]
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> U(-1, 1);
  std::vector<float> k(size_t(Hkv) * L * D), v(k.size());
  for (int c = 0; c < copies; ++c)
    for (maskattn::KVType t : {maskattn::KVType::f32, maskattn::KVType::f16}) {
      for (auto* x : {&k, &v})
        for (float& e : *x) e = U(rng);
      maskattn::KVCacheConfig cfg;
      cfg.batch = 1;
      cfg.kv_heads = Hkv;
      cfg.capacity = L;
      cfg.head_dim = D;
      cfg.dtype = t;
      caches.emplace_back(cfg);
      caches.back().append(maskattn::bhld(k.data(), 1, Hkv, L, D), maskattn::bhld(v.data(), 1, Hkv, L, D));
    }
  std::vector<float> q(size_t(Hq) * D), out(q.size());
  for (float& e : q) e = U(rng);

  std::fprintf(stderr, "measuring read bandwidth...\n");
  std::vector<float> big(size_t(128) << 20, 1.0f);  // 512 MiB
  const double bw1 = probes::read_bandwidth(big.data(), big.size(), 1, 5).best_gbs;
  const double bw2 = probes::read_bandwidth(big.data(), big.size(), 2, 5).best_gbs;
  big = {};

  const int thread_counts[2] = {1, 2};
  std::vector<double> times[2][2];  // [dtype][threads]
  std::vector<int> order = {0, 1, 2, 3};
  int copy = 0;
  for (int r = 0; r < reps; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int pair : order) {
      const int dtype = pair / 2, ti = pair % 2;
      maskattn::Options o = maskattn::KVCache::default_options();
      o.threads = thread_counts[ti];
      const maskattn::KVCache& cache = caches[size_t((copy++ % copies) * 2 + dtype)];
      auto call = [&] { cache.attend(maskattn::bhld(q.data(), 1, Hq, 1, D), maskattn::bhld(out.data(), 1, Hq, 1, D), o); };
      call();  // wake the workers (and this call reads another copy than the timed one's)
      const maskattn::KVCache& timed = caches[size_t((copy++ % copies) * 2 + dtype)];
      const double t0 = seconds();
      timed.attend(maskattn::bhld(q.data(), 1, Hq, 1, D), maskattn::bhld(out.data(), 1, Hq, 1, D), o);
      times[dtype][ti].push_back(seconds() - t0);
    }
    if ((r + 1) % 10 == 0) std::fprintf(stderr, "  %d/%d repetitions\n", r + 1, reps);
  }
  std::printf("KV cache decode step, B=1 Hq=%d Hkv=%d Lq=1 L=%d D=%d (%s), median of %d; read bandwidth %.1f GB/s "
              "(1 thread), %.1f GB/s (2 threads)\n",
              Hq, Hkv, L, D, maskattn::target_name(maskattn::best_target()), reps, bw1, bw2);
  std::printf("%-10s %8s %12s %10s %12s\n", "dtype", "threads", "ms/step", "GB/s", "% of bw");
  for (int ti = 0; ti < 2; ++ti)
    for (int dtype = 0; dtype < 2; ++dtype) {
      const double s = median(times[dtype][ti]);
      const double bytes = 2.0 * Hkv * L * D * (dtype ? 2 : 4);
      const double bw = ti ? bw2 : bw1;
      std::printf("%-10s %8d %12.3f %10.1f %11.0f%%\n", dtype ? "float16" : "float32", thread_counts[ti], s * 1e3,
                  bytes / s * 1e-9, 100 * bytes / s * 1e-9 / bw);
    }
  for (int ti = 0; ti < 2; ++ti)
    std::printf("float16 vs float32 at %d thread%s: %.2fx\n", thread_counts[ti], ti ? "s" : "",
                median(times[0][ti]) / median(times[1][ti]));
  std::printf("2 threads vs 1: float32 %.2fx, float16 %.2fx\n", median(times[0][0]) / median(times[0][1]),
              median(times[1][0]) / median(times[1][1]));
}
