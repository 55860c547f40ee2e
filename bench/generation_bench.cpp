// Native benchmark of what generation adds to a cache: decode over a paged cache (and over forked
// sequences sharing pages) against the contiguous cache, and tree verification against one decode
// step. Shape: 1 x 32/8 x 4096 x 128 (GQA), float32 and q8. Interleaved: every repetition measures
// every variant in a new random order; several caches of each variant rotate, so K/V never come
// from the CPU cache. Prints medians and the ratios the project's targets name:
//   paged (and forked) decode within 5% of contiguous;
//   16-node tree verification at most 1.3x one single-token decode step.
//
//   maskattn_generation_bench [--quick] [--threads N]
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

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr int Hq = 32, Hkv = 8, L = 4096, D = 128, kTree = 16;

// A Medusa-style tree of 16 nodes: 4 candidates for the next token, 3 continuations of the first
// two, and so on (parents before children).
const std::vector<int32_t> kParents = {-1, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 5, 5, 8, 8, 11};

struct Variant {
  const char* name;
  maskattn::KVType dtype;
  int64_t page_size;  // 0 = contiguous
  bool forked;        // the prompt appended to sequence 0 of a batch-2 cache, then forked to 1
  bool tree;          // verify 16 tree nodes instead of one decode step
};

}  // namespace

int main(int argc, char** argv) {
  bench::QuickThreads args;
  if (!bench::parse_quick_threads(argc, argv, "maskattn_generation_bench", args)) return 2;
  const bool quick = args.quick;
  const int threads = args.threads;
  const int reps = quick ? 15 : 61, copies = 3;
  std::vector<Variant> variants;
  for (maskattn::KVType t : {maskattn::KVType::float32, maskattn::KVType::q8}) {
    const bool f32 = t == maskattn::KVType::float32;
    variants.push_back({f32 ? "f32 contiguous" : "q8 contiguous", t, 0, false, false});
    variants.push_back({f32 ? "f32 paged 256" : "q8 paged 256", t, 256, false, false});
    variants.push_back({f32 ? "f32 paged 64" : "q8 paged 64", t, 64, false, false});
    variants.push_back({f32 ? "f32 forked, paged 256" : "q8 forked, paged 256", t, 256, true, false});
    variants.push_back({f32 ? "f32 tree of 16" : "q8 tree of 16", t, 0, false, true});
  }
  const int nv = int(variants.size());
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(-1, 1);
  // The prompt (L positions), then the 16 tree nodes for the tree variants.
  std::vector<float> k(size_t(Hkv) * L * D), v(k.size());
  for (auto* x : {&k, &v})
    for (float& e : *x) e = U(rng);
  std::fprintf(stderr, "filling %d caches of each of %d variants (%d positions)...\n", copies, nv, L);
  std::vector<maskattn::KVCache> caches;  // [copy * nv + variant]
  for (int c = 0; c < copies; ++c)
    for (const Variant& var : variants) {
      maskattn::KVCacheConfig cfg;
      cfg.batch = var.forked ? 2 : 1;
      cfg.kv_heads = Hkv;
      cfg.capacity = L + kTree;
      cfg.head_dim = D;
      cfg.dtype = var.dtype;
      cfg.page_size = var.page_size;
      caches.emplace_back(cfg);
      maskattn::KVCache& cache = caches.back();
      const int64_t T = var.tree ? L - kTree : L;
      if (var.forked) {  // sequence 0 holds the prompt, sequence 1 shares it; both attend
        std::vector<float> k2(k.size() * 2), v2(k2.size());
        std::copy(k.begin(), k.end(), k2.begin());
        std::copy(v.begin(), v.end(), v2.begin());
        cache.append(maskattn::bhld(k2.data(), 2, Hkv, T, D), maskattn::bhld(v2.data(), 2, Hkv, T, D),
                     std::vector<int32_t>{int32_t(T), 0});
        cache.fork(0, 1);
      } else {
        cache.append(maskattn::bhld(k.data(), 1, Hkv, T, D), maskattn::bhld(v.data(), 1, Hkv, T, D));
        if (var.tree)
          cache.append(maskattn::bhld(k.data(), 1, Hkv, kTree, D), maskattn::bhld(v.data(), 1, Hkv, kTree, D));
      }
    }
  std::vector<float> q(size_t(2) * Hq * kTree * D), out(q.size());
  for (float& e : q) e = U(rng);

  std::vector<std::vector<double>> times(static_cast<size_t>(nv));
  std::vector<int> order(static_cast<size_t>(nv));
  for (int i = 0; i < nv; ++i) order[size_t(i)] = i;
  int turn = 0;
  for (int r = 0; r < reps; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int vi : order) {
      const Variant& var = variants[size_t(vi)];
      maskattn::Options o = maskattn::KVCache::default_options();
      o.threads = threads;
      if (var.tree) o.tree = kParents;
      const int64_t B = var.forked ? 2 : 1, Lq = var.tree ? kTree : 1;
      auto call = [&](const maskattn::KVCache& c) {
        c.attend(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(out.data(), B, Hq, Lq, D), o);
      };
      call(caches[size_t((turn++ % copies) * nv + vi)]);  // wake the workers
      const maskattn::KVCache& timed = caches[size_t((turn++ % copies) * nv + vi)];
      const double t0 = seconds();
      call(timed);
      // A forked cache attends 2 sequences: per sequence, as the others attend one.
      times[size_t(vi)].push_back((seconds() - t0) / double(B));
    }
    if ((r + 1) % 20 == 0) std::fprintf(stderr, "  %d/%d repetitions\n", r + 1, reps);
  }
  std::printf("generation: B=1 Hq=%d Hkv=%d L=%d D=%d, %s, %d thread(s), median of %d (ms per sequence)\n", Hq, Hkv, L, D,
              maskattn::target_name(maskattn::best_target()), threads, reps);
  for (int base = 0; base < nv; base += 5) {
    const double contiguous = bench::median(times[size_t(base)]);
    for (int i = 0; i < 5; ++i) {
      const double t = bench::median(times[size_t(base + i)]);
      std::printf("  %-24s %8.3f ms   %5.3fx the contiguous decode step%s\n", variants[size_t(base + i)].name, t * 1e3,
                  t / contiguous, i == 4 ? " (target <= 1.3x)" : i > 0 ? " (target <= 1.05x)" : "");
    }
  }
}
