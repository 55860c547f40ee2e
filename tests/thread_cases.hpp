// The problems the thread suites run (test_threads.cpp: the library's own pool; test_executor.cpp:
// a host's executor): shapes that really split across threads, their inputs, one call returning
// O, weights and lse in one vector, bitwise comparison, and several application threads calling
// at once. Native only (the WebAssembly test builds' threads are a fixed pool of workers).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "maskattn/maskattn.hpp"

namespace maskattn_test {

// n values in [-1, 1) from a linear congruential generator seeded with `seed`.
inline std::vector<float> lcg_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) / float(1u << 24) * 2.0f - 1.0f;
  }
  return v;
}

inline std::vector<maskattn::Target> available_targets() {
  std::vector<maskattn::Target> t;
  for (auto x : maskattn::kKernelTargets)
    if (maskattn::target_available(x)) t.push_back(x);
  return t;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A problem shape. Sequence b's key length is Lk - (b * ragged_step) % (Lk - 2) (0: every key);
// a problem that is not causal and has more than 100 keys gets the window (300, 50).
struct ThreadShape {
  const char* name;
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  bool causal;
  int64_t ragged_step;
};

struct ThreadInputs {
  ThreadShape s;
  std::vector<float> q, k, v;
  std::vector<int32_t> key_lengths;
  explicit ThreadInputs(const ThreadShape& shape) : s(shape) {
    q = lcg_values(size_t(s.B * s.Hq * s.Lq * s.D), 1);
    k = lcg_values(size_t(s.B * s.Hkv * s.Lk * s.D), 2);
    v = lcg_values(size_t(s.B * s.Hkv * s.Lk * s.Dv), 3);
    for (int64_t b = 0; b < s.B; ++b) key_lengths.push_back(int32_t(s.Lk - (b * s.ragged_step) % (s.Lk - 2)));
  }
  maskattn::Options options(maskattn::Target t, maskattn::Kernel kernel, int threads,
                            const maskattn::Executor* executor = nullptr, maskattn::Stats* stats = nullptr) const {
    maskattn::Options o;
    o.causal = s.causal;
    o.key_lengths = key_lengths;
    if (!s.causal && s.Lk > 100) o.window = {300, 50};
    o.target = t;
    o.kernel = kernel;
    o.threads = threads;
    o.executor = executor;
    o.stats = stats;
    return o;
  }
  // O, weights and lse in one vector (bitwise comparisons).
  std::vector<float> run(maskattn::Target t, maskattn::Kernel kernel, int threads,
                         const maskattn::Executor* executor = nullptr, maskattn::Stats* stats = nullptr) const {
    const int64_t no = s.B * s.Hq * s.Lq * s.Dv, nw = s.B * s.Hq * s.Lq * s.Lk, nl = s.B * s.Hq * s.Lq;
    std::vector<float> r(size_t(no + nw + nl));
    maskattn::ExtraOutputs extra;
    extra.weights = r.data() + no;
    extra.lse = r.data() + no + nw;
    maskattn::attention(maskattn::bhld<const float>(q.data(), s.B, s.Hq, s.Lq, s.D),
                        maskattn::bhld<const float>(k.data(), s.B, s.Hkv, s.Lk, s.D),
                        maskattn::bhld<const float>(v.data(), s.B, s.Hkv, s.Lk, s.Dv),
                        maskattn::bhld(r.data(), s.B, s.Hq, s.Lq, s.Dv), options(t, kernel, threads, executor, stats),
                        extra);
    return r;
  }
};

// `callers` application threads at once, each calling body(caller, round) for rounds 0 .. rounds-1:
// how many calls gave a wrong answer (body returned false) and how many threw.
struct ConcurrentCalls {
  int wrong = 0, errors = 0;
};
inline ConcurrentCalls run_concurrently(int callers, int rounds, const std::function<bool(int, int)>& body) {
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      try {
        for (int n = 0; n < rounds; ++n)
          if (!body(c, n)) ++wrong;
      } catch (...) {
        ++errors;
      }
    });
  for (auto& t : threads) t.join();
  return {wrong.load(), errors.load()};
}

}  // namespace maskattn_test
