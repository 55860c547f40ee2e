// The problems the thread suites run (test_threads.cpp: the library's own pool; test_executor.cpp:
// a host's executor): shapes that really split across threads, their inputs, one call returning
// O, weights and lse in one vector, bitwise comparison, and several application threads calling
// at once. The problems are AttentionCase (attention_case.hpp). Native only (the WebAssembly test
// builds' threads are a fixed pool of workers).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "attention_case.hpp"
#include "maskattn/maskattn.hpp"

namespace maskattn_test {

// A linear congruential generator: values uniform in [lo, hi), 24 random bits each.
struct Lcg {
  uint32_t state;
  float uniform(float lo, float hi) {
    state = state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float(state >> 8) / float(1u << 24));
  }
};

// n values in [-1, 1) from the generator seeded with `seed`.
inline std::vector<float> lcg_values(size_t n, uint32_t seed) {
  Lcg g{seed};
  std::vector<float> v(n);
  for (float& x : v) x = g.uniform(-1.0f, 1.0f);
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

// A shape as an AttentionCase (attention_case.hpp) with its inputs: Q, K and V contiguous bhld from
// the generators seeded 1, 2 and 3.
struct ThreadInputs {
  ThreadShape s;
  AttentionCase c;
  CaseInputs inputs;
  explicit ThreadInputs(const ThreadShape& shape) : s(shape) {
    c.dims(s.B, s.Hq, s.Hkv, s.Lq, s.Lk, s.D, s.Dv);
    c.causal = s.causal;
    for (int64_t b = 0; b < s.B; ++b) c.key_lengths.push_back(int32_t(s.Lk - (b * s.ragged_step) % (s.Lk - 2)));
    if (!s.causal && s.Lk > 100) c.window = {300, 50};
    Lcg gq{1}, gk{2}, gv{3};
    inputs = c.make_inputs(gq, gk, gv);
  }
  maskattn::Options options(maskattn::Target t, maskattn::Kernel kernel, int threads,
                            const maskattn::Executor* executor = nullptr, maskattn::Stats* stats = nullptr) const {
    maskattn::Options o = c.options(t, kernel);
    o.threads = threads;
    o.executor = executor;
    o.stats = stats;
    return o;
  }
  // O, weights and lse in one vector (bitwise comparisons). Throws what attention() throws.
  std::vector<float> run(maskattn::Target t, maskattn::Kernel kernel, int threads,
                         const maskattn::Executor* executor = nullptr, maskattn::Stats* stats = nullptr) const {
    const CaseRun run = c.run_kernel(inputs, options(t, kernel, threads, executor, stats));
    std::vector<float> r = run.out.dense();
    const std::vector<float> w = run.weight_values(), l = run.lse_values();
    r.insert(r.end(), w.begin(), w.end());
    r.insert(r.end(), l.begin(), l.end());
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
