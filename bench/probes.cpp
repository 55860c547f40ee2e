#include "probes.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace probes {
namespace {

using clock_type = std::chrono::steady_clock;

// Runs body(t) on `threads` threads started together; returns the wall seconds until all are done.
template <class F>
double timed_parallel(int threads, F body) {
  if (threads <= 1) {
    const auto t0 = clock_type::now();
    body(0);
    return std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      body(t);
    });
  while (ready.load() < threads) {
  }
  const auto t0 = clock_type::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// 12 independent chains hide the FMA latency; returns a value so nothing is optimised away.
__attribute__((target("avx2,fma"))) float fma_avx2(long iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + i * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) float fma_avx512(long iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (long n = 0; n < iters; ++n)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

float sum_floats(const float* p, size_t n) {
  float acc[64] = {};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
#pragma omp simd
    for (int j = 0; j < 64; ++j) acc[j] += p[i + j];
  }
  float s = 0;
  for (; i < n; ++i) s += p[i];
  for (float a : acc) s += a;
  return s;
}

Bandwidth summary(std::vector<double>& gbs) {
  std::sort(gbs.begin(), gbs.end());
  Bandwidth b;
  b.best_gbs = gbs.back();
  b.median_gbs = gbs[gbs.size() / 2];
  return b;
}

}  // namespace

double fma_peak_gflops(int threads, long iters, int reps) {
  __builtin_cpu_init();
  double best = 0;
  std::atomic<float> sink{0};
  for (int width : {256, 512}) {
    if (width == 256 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) continue;
    if (width == 512 && !__builtin_cpu_supports("avx512f")) continue;
    for (int r = 0; r < reps; ++r) {
      const double s = timed_parallel(threads, [&](int) {
        sink.store(width == 512 ? fma_avx512(iters) : fma_avx2(iters), std::memory_order_relaxed);
      });
      best = std::max(best, 12.0 * (width / 32) * 2 * double(iters) * threads / s * 1e-9);
    }
  }
  return best;
}

Bandwidth read_bandwidth(const float* buf, size_t n, int threads, int reps) {
  std::vector<double> gbs;
  std::atomic<float> sink{0};
  const size_t part = n / size_t(threads) / 64 * 64;
  for (int r = 0; r < reps; ++r) {
    const double s = timed_parallel(threads, [&](int t) {
      sink.store(sum_floats(buf + size_t(t) * part, part), std::memory_order_relaxed);
    });
    gbs.push_back(double(part) * threads * sizeof(float) / s * 1e-9);
  }
  return summary(gbs);
}

Bandwidth tiled_read_bandwidth(const float* buf, size_t n, size_t tile_floats, int reps) {
  std::vector<double> gbs;
  std::atomic<float> sink{0};
  const size_t half = n / 2 / tile_floats * tile_floats;
  for (int r = 0; r < reps; ++r) {
    float s = 0;
    const auto t0 = clock_type::now();
    for (size_t i = 0; i < half; i += tile_floats) s += sum_floats(buf + i, tile_floats) + sum_floats(buf + half + i, tile_floats);
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    sink.store(s, std::memory_order_relaxed);
    gbs.push_back(double(2 * half) * sizeof(float) / sec * 1e-9);
  }
  return summary(gbs);
}

}  // namespace probes
