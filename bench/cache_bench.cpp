// Native KV-cache benchmark: one decode step (attend one query per head over a resident cache) for
// every cache dtype (float32, float16, q8, q4, q8 keys with q4 values, bfloat16), on the MHA shape 1 x 32/32 x 2048 x 128
// and the GQA shape 1 x 32/8 x 4096 x 128, at 1 and 2 threads. Interleaved: each repetition measures
// every (dtype, threads) pair in a new random order; four caches of each dtype rotate, so K/V never
// come from the CPU cache. Prints ms per step, GB/s of K/V read, the ratios the README quotes, and
// each dtype's error against the float32 cache on the same Gaussian data (max |ΔO| / max |V| and
// cosine similarity), and the error of q4 keys with and without rotation on outlier-channel keys.
// At 1 thread also the step's time per key and KV head from memory and in the CPU's cache: the slope
// between two caches of L/16 and L/8 keys (0.3-8 MiB), each stepped again and again after the timed
// runs (its rows then come from the cache, and the slope drops the step's fixed cost). Where the two
// are equal the step is bound by its instructions, not by the bytes it reads.
//
//   maskattn_cache_bench [--quick] [--shape mha|gqa|both] [--threads N] [--json FILE] [--accuracy]
// (--json: the timings as JSON rows, which bench/js/cache-chart.mjs draws with the wasm ones.)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

#include "probes.hpp"
#include "stats.hpp"

namespace {

using maskattn::KVType;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using bench::median;

struct DtypePair {
  KVType k, v;
  const char* name;
};
const DtypePair kDtypes[] = {{KVType::float32, KVType::float32, "float32"},
                             {KVType::float16, KVType::float16, "float16"},
                             {KVType::q8, KVType::q8, "q8"},
                             {KVType::q4, KVType::q4, "q4"},
                             {KVType::q8, KVType::q4, "q8/q4"},
                             {KVType::bfloat16, KVType::bfloat16, "bfloat16"}};
constexpr int kNumDtypes = int(std::size(kDtypes));

struct Shape {
  const char* name;
  int Hq, Hkv, L, D;
};

maskattn::KVCacheConfig config(const Shape& s, const DtypePair& t,
                               maskattn::KeyRotation rot = maskattn::KeyRotation::automatic) {
  maskattn::KVCacheConfig cfg;
  cfg.batch = 1;
  cfg.kv_heads = s.Hkv;
  cfg.capacity = s.L;
  cfg.head_dim = s.D;
  cfg.dtype = t.k;
  cfg.value_dtype = t.v;
  cfg.key_rotation = rot;
  return cfg;
}

// Max |ΔO| / max |V| and cosine similarity of out against the float32 cache's output.
struct Error {
  double rel_max = 0, cosine = 1;
};
Error error_against(const std::vector<float>& ref, const std::vector<float>& out, double vmax) {
  double m = 0, dot = 0, a = 0, b = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    m = std::max(m, std::fabs(double(out[i]) - double(ref[i])));
    dot += double(out[i]) * ref[i];
    a += double(ref[i]) * ref[i];
    b += double(out[i]) * out[i];
  }
  return {m / vmax, dot / std::sqrt(a * b)};
}

// Each dtype's output error against float32 on the same data: Gaussian K, V and q; then keys with
// two outlier channels (10x) for q4 keys with and without rotation.
void accuracy(const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> N(0, 1);
  const size_t kv = size_t(s.Hkv) * s.L * s.D;
  std::vector<float> k(kv), v(kv), q(size_t(s.Hq) * s.D);
  auto run = [&](const maskattn::KVCacheConfig& cfg) {
    maskattn::KVCache cache(cfg);
    cache.append(maskattn::bhld(k.data(), 1, s.Hkv, s.L, s.D), maskattn::bhld(v.data(), 1, s.Hkv, s.L, s.D));
    std::vector<float> out(q.size());
    cache.attend(maskattn::bhld(q.data(), 1, s.Hq, 1, s.D), maskattn::bhld(out.data(), 1, s.Hq, 1, s.D));
    return out;
  };
  for (float& e : k) e = N(rng);
  for (float& e : v) e = N(rng);
  for (float& e : q) e = N(rng);
  double vmax = 0;
  for (float x : v) vmax = std::max(vmax, double(std::fabs(x)));
  const std::vector<float> ref = run(config(s, kDtypes[0]));
  std::printf("  error against the float32 cache (Gaussian K, V, q; max |dO| / max |V|, cosine):\n");
  for (int t = 1; t < kNumDtypes; ++t) {
    const Error e = error_against(ref, run(config(s, kDtypes[t])), vmax);
    std::printf("    %-8s %9.4f%%   cosine %.6f\n", kDtypes[t].name, 100 * e.rel_max, e.cosine);
  }
  // Outlier channels: the same keys with channels 3 and 77 scaled 10x (q stays Gaussian).
  const Error gauss_rot = error_against(ref, run(config(s, kDtypes[3], maskattn::KeyRotation::hadamard)), vmax);
  const Error gauss_q8 = error_against(ref, run(config(s, kDtypes[2])), vmax);
  for (size_t j = 0; j < kv / size_t(s.D); ++j)
    for (int c : {3, 77 % s.D}) k[j * size_t(s.D) + size_t(c)] *= 10.0f;
  const std::vector<float> ref_out = run(config(s, kDtypes[0]));
  const Error plain = error_against(ref_out, run(config(s, kDtypes[3], maskattn::KeyRotation::none)), vmax);
  const Error rotated = error_against(ref_out, run(config(s, kDtypes[3], maskattn::KeyRotation::hadamard)), vmax);
  const Error outlier_q8 = error_against(ref_out, run(config(s, kDtypes[2])), vmax);
  std::printf("  q4 keys (q4 values) on keys with 2 outlier channels (10x): not rotated %.4f%% (cosine %.6f), "
              "rotated %.4f%% (cosine %.6f); rotated on Gaussian keys %.4f%%: outliers cost %.2fx\n",
              100 * plain.rel_max, plain.cosine, 100 * rotated.rel_max, rotated.cosine, 100 * gauss_rot.rel_max,
              rotated.rel_max / gauss_rot.rel_max);
  // How much more sensitive the outlier data is in itself: the same ratio for 8-bit keys and values.
  std::printf("  for comparison, q8 on the same outlier keys %.4f%% vs Gaussian %.4f%%: %.2fx\n", 100 * outlier_q8.rel_max,
              100 * gauss_q8.rel_max, outlier_q8.rel_max / gauss_q8.rel_max);
}

std::string g_json;        // rows of --json
bool g_accuracy_only = false;  // --accuracy: the errors only, no timing

void speed(const Shape& s, int reps, int max_threads, std::mt19937& rng) {
  if (g_accuracy_only) {
    std::printf("%s: B=1 Hq=%d Hkv=%d Lq=1 L=%d D=%d\n", s.name, s.Hq, s.Hkv, s.L, s.D);
    return accuracy(s, rng);
  }
  const int copies = 4;
  std::fprintf(stderr, "%s: filling %d caches of each dtype (%d positions)...\n", s.name, copies, s.L);
  std::vector<maskattn::KVCache> caches;  // [copy * kNumDtypes + dtype]
  std::uniform_real_distribution<float> U(-1, 1);
  std::vector<float> k(size_t(s.Hkv) * s.L * s.D), v(k.size());
  for (int c = 0; c < copies; ++c)
    for (const DtypePair& t : kDtypes) {
      for (auto* x : {&k, &v})
        for (float& e : *x) e = U(rng);
      caches.emplace_back(config(s, t));
      caches.back().append(maskattn::bhld(k.data(), 1, s.Hkv, s.L, s.D), maskattn::bhld(v.data(), 1, s.Hkv, s.L, s.D));
    }
  // Two small caches of each dtype (L/16 and L/8 keys) for the in-cache time per key.
  const int small_keys[2] = {s.L / 16, s.L / 8};
  std::vector<maskattn::KVCache> small;  // [dtype * 2 + i]
  for (const DtypePair& t : kDtypes)
    for (int n : small_keys) {
      Shape sh = s;
      sh.L = n;
      small.emplace_back(config(sh, t));
      small.back().append(maskattn::bhld(k.data(), 1, s.Hkv, n, s.D), maskattn::bhld(v.data(), 1, s.Hkv, n, s.D));
    }
  std::vector<std::vector<double>> small_times(small.size());
  std::vector<float> q(size_t(s.Hq) * s.D), out(q.size());
  for (float& e : q) e = U(rng);

  std::vector<int> threads = {1};
  if (max_threads >= 2) threads.push_back(2);
  if (max_threads > 2) threads.push_back(max_threads);
  const int nt = int(threads.size());
  std::vector<std::vector<double>> times(size_t(kNumDtypes * nt));  // [dtype * nt + ti]
  std::vector<int> order(times.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  int copy = 0;
  for (int r = 0; r < reps; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int pair : order) {
      const int dtype = pair / nt, ti = pair % nt;
      maskattn::Options o = maskattn::KVCache::default_options();
      o.threads = threads[size_t(ti)];
      auto call = [&](const maskattn::KVCache& c) {
        c.attend(maskattn::bhld(q.data(), 1, s.Hq, 1, s.D), maskattn::bhld(out.data(), 1, s.Hq, 1, s.D), o);
      };
      call(caches[size_t((copy++ % copies) * kNumDtypes + dtype)]);  // wake the workers
      const maskattn::KVCache& timed = caches[size_t((copy++ % copies) * kNumDtypes + dtype)];
      const double t0 = seconds();
      call(timed);
      times[size_t(pair)].push_back(seconds() - t0);
    }
    if ((r + 1) % 10 == 0) std::fprintf(stderr, "  %d/%d repetitions\n", r + 1, reps);
  }
  // In cache, at 1 thread: each small cache's step again and again, the first calls untimed (one
  // call after the big caches' streams measured up to 2x the settled time).
  {
    maskattn::Options o = maskattn::KVCache::default_options();
    o.threads = 1;
    for (size_t i = 0; i < small.size(); ++i)
      for (int r = 0; r < 4 + 3 * reps; ++r) {
        const double t0 = seconds();
        small[i].attend(maskattn::bhld(q.data(), 1, s.Hq, 1, s.D), maskattn::bhld(out.data(), 1, s.Hq, 1, s.D), o);
        if (r >= 4) small_times[i].push_back(seconds() - t0);
      }
  }
  std::printf("%s: decode step B=1 Hq=%d Hkv=%d Lq=1 L=%d D=%d (%s), median of %d\n", s.name, s.Hq, s.Hkv, s.L, s.D,
              maskattn::target_name(maskattn::best_target()), reps);
  std::printf("  %-8s %8s %10s %10s %12s %11s %9s %10s\n", "dtype", "threads", "ms/step", "GB/s", "vs float32",
              "ns/key mem", "in cache", "cache/mem");
  auto t_of = [&](int dtype, int ti) { return median(times[size_t(dtype * nt + ti)]); };
  for (int ti = 0; ti < nt; ++ti)
    for (int dtype = 0; dtype < kNumDtypes; ++dtype) {
      const double sec = t_of(dtype, ti), bytes = double(caches[size_t(dtype)].byte_length());
      std::printf("  %-8s %8d %10.3f %10.1f %11.2fx", kDtypes[dtype].name, threads[size_t(ti)], sec * 1e3,
                  bytes / sec * 1e-9, t_of(0, ti) / sec);
      if (ti == 0) {
        const double mem = sec * 1e9 / (double(s.Hkv) * s.L);
        const double in_cache = (median(small_times[size_t(dtype * 2 + 1)]) - median(small_times[size_t(dtype * 2)])) * 1e9 /
                                (double(s.Hkv) * (small_keys[1] - small_keys[0]));
        std::printf(" %11.2f %9.2f %9.0f%%", mem, in_cache, 100 * in_cache / mem);
      }
      std::printf("\n");
      char row[256];
      std::snprintf(row, sizeof row, "%s{\"shape\": \"%s\", \"build\": \"native %s\", \"threads\": %d, \"dtype\": \"%s\", \"ms\": %.4f}",
                    g_json.empty() ? "" : ",\n", s.name, maskattn::target_name(maskattn::best_target()), threads[size_t(ti)],
                    kDtypes[dtype].name, sec * 1e3);
      g_json += row;
    }
  std::printf("  q8 vs float16 at 1 thread %.2fx; q4 vs q8 %.2fx; bfloat16 vs float16 %.2fx", t_of(1, 0) / t_of(2, 0), t_of(2, 0) / t_of(3, 0),
              t_of(1, 0) / t_of(5, 0));
  if (nt > 1) std::printf("; 2 threads vs 1: float32 %.2fx, q8 %.2fx, q4 %.2fx", t_of(0, 0) / t_of(0, 1),
                          t_of(2, 0) / t_of(2, 1), t_of(3, 0) / t_of(3, 1));
  std::printf("\n");
  accuracy(s, rng);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string shape = "both";
  int max_threads = 2;
  std::string json;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") quick = true;
    else if (arg == "--shape" && a + 1 < argc) shape = argv[++a];
    else if (arg == "--threads" && a + 1 < argc) max_threads = std::atoi(argv[++a]);
    else if (arg == "--json" && a + 1 < argc) json = argv[++a];
    else if (arg == "--accuracy") g_accuracy_only = true;
    else {
      std::fprintf(stderr, "usage: maskattn_cache_bench [--quick] [--shape mha|gqa|both] [--threads N] [--json FILE] [--accuracy]\n");
      return 2;
    }
  }
  std::mt19937 rng(7);
  std::fprintf(stderr, "measuring read bandwidth...\n");
  if (!g_accuracy_only) {
    std::vector<float> big(size_t(128) << 20, 1.0f);  // 512 MiB
    std::printf("read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (2 threads)\n",
                probes::read_bandwidth(big.data(), big.size(), 1, 5).best_gbs,
                probes::read_bandwidth(big.data(), big.size(), 2, 5).best_gbs);
    // The float32 step's own order of reads (64-key tiles of 128-float K rows, then V rows), with
    // nothing else to do: what that order allows this core, beside the plain stream above.
    std::printf("read bandwidth in the decode step's order (K and V tiles of 32 KiB alternating): %.1f GB/s (1 thread)\n",
                probes::tiled_read_bandwidth(big.data(), big.size(), 64 * 128, 5).best_gbs);
  }
  const int reps = quick ? 11 : 41;
  if (shape == "mha" || shape == "both") speed({"MHA", 32, 32, 2048, 128}, reps, max_threads, rng);
  if (shape == "gqa" || shape == "both") speed({"GQA", 32, 8, 4096, 128}, reps, max_threads, rng);
  if (!json.empty()) {
    if (FILE* f = std::fopen(json.c_str(), "w")) {
      std::fprintf(f, "{\"results\": [\n%s\n]}\n", g_json.c_str());
      std::fclose(f);
    }
  }
}
