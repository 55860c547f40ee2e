// Native benchmark: time per call and GFLOP/s of the fused kernel on every available target, for
// the shapes the project is held to. FLOPs count the useful work: 2*D + 2*Dv per allowed pair.
//   maskattn_bench [--quick] [--target NAME] [--threads N] [--cpu-time]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

#ifdef MASKATTN_BENCH_OPENBLAS
#include "peers/blas_attention.hpp"
extern "C" void openblas_set_num_threads(int);
#endif

namespace {

struct Case {
  const char* name;
  int B, H, Lq, Lk, D;
  bool causal;
};

// CPU time of this thread: on a shared machine it excludes time other processes hold the core
// (with one thread and no SMT sharing it matches wall time on an idle machine).
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Best of several runs (the least disturbed), after a warm-up call.
double seconds_per_call(const std::function<void()>& f, double budget, bool cpu_time) {
  f();  // warm up (page faults, packing buffers)
  int reps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0, best = 1e30;
  while (elapsed < budget || reps < 3) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_seconds();
    f();
    const double c1 = thread_seconds();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, cpu_time ? c1 - c0 : std::chrono::duration<double>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - start).count();
    ++reps;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  int threads = 1;
  bool cpu_time = false;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--quick")) quick = true;
    else if (!std::strcmp(argv[a], "--target") && a + 1 < argc) only = argv[++a];
    else if (!std::strcmp(argv[a], "--threads") && a + 1 < argc) threads = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--cpu-time")) cpu_time = true;
  }
  const std::vector<Case> cases = {
      {"causal 1x8x512x64", 1, 8, 512, 512, 64, true},
      {"causal 1x12x1024x64", 1, 12, 1024, 1024, 64, true},
      {"dense 1x12x1024x64", 1, 12, 1024, 1024, 64, false},
      {"dense 1x12x1024x128", 1, 12, 1024, 1024, 128, false},
      {"decode 1x32x1x4096x128", 1, 32, 1, 4096, 128, true},
  };
  std::vector<std::string> tile_lines;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> U(-1, 1);
#ifdef MASKATTN_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  std::printf("one core%s; time = best of several calls (%s); GFLOP/s counts 4*D flops per allowed pair\n",
              threads > 1 ? "s" : "", cpu_time ? "thread CPU time" : "wall clock");
  std::printf("%-24s %-8s %10s %10s %10s\n", "case", "impl", "ms/call", "GFLOP/s", "vs peer");
  for (const Case& c : cases) {
    std::vector<float> q(size_t(c.B) * c.H * c.Lq * c.D), k(size_t(c.B) * c.H * c.Lk * c.D), v(k.size()), o(q.size());
    for (auto* t : {&q, &k, &v})
      for (auto& x : *t) x = U(rng);
    double pairs = double(c.Lq) * c.Lk;
    if (c.causal) {
      pairs = 0;
      for (int i = 0; i < c.Lq; ++i) pairs += std::min<double>(c.Lk, i + (c.Lk - c.Lq) + 1);
    }
    const double flops = 4.0 * c.D * pairs * c.B * c.H;
    double peer = 0;
#ifdef MASKATTN_BENCH_OPENBLAS
    std::vector<float> scratch;
    peer = seconds_per_call([&] {
      peers::blas_attention(q.data(), k.data(), v.data(), o.data(), c.B, c.H, c.Lq, c.Lk, c.D, c.causal, scratch);
    }, quick ? 0.2 : 1.0, cpu_time && threads == 1);
    std::printf("%-24s %-8s %10.3f %10.1f %10s\n", c.name, "openblas", peer * 1e3, flops / peer * 1e-9, "1.00x");
#endif
    for (maskattn::Target t : {maskattn::Target::avx512, maskattn::Target::avx2, maskattn::Target::sse2,
                               maskattn::Target::simd128, maskattn::Target::scalar}) {
      if (!maskattn::target_available(t)) continue;
      if (!only.empty() && only != maskattn::target_name(t)) continue;
      if (quick && t == maskattn::Target::scalar) continue;
      maskattn::Options opt;
      opt.causal = c.causal;
      opt.target = t;
      opt.threads = threads;
      const double s = seconds_per_call([&] {
        maskattn::attention(maskattn::bhld(q.data(), c.B, c.H, c.Lq, c.D), maskattn::bhld(k.data(), c.B, c.H, c.Lk, c.D),
                            maskattn::bhld(v.data(), c.B, c.H, c.Lk, c.D), maskattn::bhld(o.data(), c.B, c.H, c.Lq, c.D), opt);
      }, quick ? 0.2 : 1.0, cpu_time && threads == 1);
      if (t == maskattn::best_target()) {  // the tile counters of this case (kernel-internal blocks)
        maskattn::Stats stats;
        opt.stats = &stats;
        maskattn::attention(maskattn::bhld(q.data(), c.B, c.H, c.Lq, c.D), maskattn::bhld(k.data(), c.B, c.H, c.Lk, c.D),
                            maskattn::bhld(v.data(), c.B, c.H, c.Lk, c.D), maskattn::bhld(o.data(), c.B, c.H, c.Lq, c.D), opt);
        opt.stats = nullptr;
        tile_lines.push_back(std::string(c.name) + " (" + maskattn::target_name(t) + "): skipped " +
                             std::to_string(stats.tiles_skipped) + ", full " + std::to_string(stats.tiles_full) +
                             ", mixed " + std::to_string(stats.tiles_mixed));
      }
      char ratio[32] = "-";
      if (peer > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", peer / s);
      std::printf("%-24s %-8s %10.3f %10.1f %10s\n", c.name, maskattn::target_name(t), s * 1e3, flops / s * 1e-9, ratio);
    }
  }
  std::printf("\ntile counters (query block x key tile):\n");
  for (const auto& line : tile_lines) std::printf("  %s\n", line.c_str());
}
