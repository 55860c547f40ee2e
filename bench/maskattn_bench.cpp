// Native benchmark: time per call and GFLOP/s of the fused kernel on every available target, for
// the shapes the project is held to. FLOPs count the useful work: 2*D + 2*Dv per allowed pair.
//   maskattn_bench [--quick] [--target NAME] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

namespace {

struct Case {
  const char* name;
  int B, H, Lq, Lk, D;
  bool causal;
};

double seconds_per_call(const std::function<void()>& f, double budget) {
  f();  // warm up (page faults, packing buffers)
  int reps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0, best = 1e30;
  while (elapsed < budget || reps < 3) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
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
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--quick")) quick = true;
    else if (!std::strcmp(argv[a], "--target") && a + 1 < argc) only = argv[++a];
    else if (!std::strcmp(argv[a], "--threads") && a + 1 < argc) threads = std::atoi(argv[++a]);
  }
  const std::vector<Case> cases = {
      {"causal 1x8x512x64", 1, 8, 512, 512, 64, true},
      {"causal 1x12x1024x64", 1, 12, 1024, 1024, 64, true},
      {"dense 1x12x1024x64", 1, 12, 1024, 1024, 64, false},
      {"decode 1x32x1x4096x128", 1, 32, 1, 4096, 128, true},
  };
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> U(-1, 1);
  std::printf("%-24s %-8s %10s %10s\n", "case", "target", "ms/call", "GFLOP/s");
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
      }, quick ? 0.2 : 1.0);
      std::printf("%-24s %-8s %10.3f %10.1f\n", c.name, maskattn::target_name(t), s * 1e3, flops / s * 1e-9);
    }
  }
}
