// Thread scaling: each case of bench/cases.hpp timed at 1, 2, 4, ... threads (up to the machine's
// cores), printing speed-up over 1 thread and parallel efficiency (speed-up / threads).
//
//   maskattn_scaling [--threads 1,2,4,8,16] [--case ID[,ID...]] [--budget SECONDS] [--json FILE]
//
// Same method as maskattn_bench: the thread counts of a case are measured in turn, in a new random
// order each repetition (a short pause, up to 3 untimed calls, then the timed call), inputs rotated
// over 2-4 copies, medians reported. Each thread count's output is also compared bitwise with the
// 1-thread output (results must not depend on the thread count). On a machine shared with other
// work, efficiencies above 1 thread measure the machine as much as the library: quote them with
// the machine's load.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <maskattn/maskattn.hpp>

#include "cases.hpp"
#include "stats.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

using bench::median;
using bench::parse_list;

// 1, 2, 4, ... up to the cores, and the core count itself.
std::vector<int> default_threads(int cores) {
  std::vector<int> t;
  for (int n = 1; n < cores; n *= 2) t.push_back(n);
  t.push_back(std::max(1, cores));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int cores = int(std::thread::hardware_concurrency());
  std::vector<int> threads = default_threads(cores);
  std::vector<std::string> only = {"1", "2", "3", "4", "5", "6", "8", "11", "12"};
  double budget = 2.0;
  std::string json_path;
  for (int a = 1; a < argc; ++a) {
    const bool has = a + 1 < argc;
    if (!std::strcmp(argv[a], "--threads") && has) {
      threads.clear();
      for (const std::string& x : parse_list(argv[++a])) threads.push_back(std::max(1, std::atoi(x.c_str())));
    } else if (!std::strcmp(argv[a], "--case") && has) {
      only = parse_list(argv[++a]);
    } else if (!std::strcmp(argv[a], "--budget") && has) {
      budget = std::atof(argv[++a]);
    } else if (!std::strcmp(argv[a], "--json") && has) {
      json_path = argv[++a];
    } else {
      std::fprintf(stderr, "usage: maskattn_scaling [--threads 1,2,4] [--case ID[,ID...]] [--budget SECONDS] [--json FILE]\n");
      return 2;
    }
  }
  if (std::find(threads.begin(), threads.end(), 1) == threads.end()) threads.insert(threads.begin(), 1);

  std::printf("maskattn %s thread scaling (target %s), %d cores; median of interleaved calls\n", maskattn::version(),
              maskattn::target_name(maskattn::best_target()), cores);
  std::printf("%-45s", "case");
  for (int t : threads) std::printf(" | %3dT ms  speed-up  eff", t);
  std::printf("\n");
  std::ostringstream js;
  js << "{\"cores\": " << cores << ", \"target\": \"" << maskattn::target_name(maskattn::best_target())
     << "\", \"cases\": [";
  int mismatches = 0;
  bool first_case = true;
  for (const bench::CaseDef& c : bench::make_cases()) {
    if (std::find(only.begin(), only.end(), c.id) == only.end()) continue;
    const peers::Problem& p = c.p;
    const size_t copy_bytes = (p.q_size() + 2 * p.kv_size()) * sizeof(float);
    const int copies = int(std::clamp<size_t>((size_t(128) << 20) / copy_bytes + 1, 2, 4));
    std::vector<std::vector<float>> q(static_cast<size_t>(copies)), k(q.size()), v(q.size());
    bench::Rng r(1000);
    q[0].resize(p.q_size());
    k[0].resize(p.kv_size());
    v[0].resize(p.kv_size());
    for (auto* x : {&q[0], &k[0], &v[0]})
      for (float& e : *x) e = r.uniform();
    for (int i = 1; i < copies; ++i) q[size_t(i)] = q[0], k[size_t(i)] = k[0], v[size_t(i)] = v[0];

    maskattn::Options base;
    base.causal = p.causal;
    if (!p.key_lengths.empty()) base.key_lengths = maskattn::Span<int32_t>(p.key_lengths);
    if (!p.allowed.empty()) base.allowed = maskattn::make_mask(p.allowed.data(), p.B, p.Hq, p.Lq, p.Lk);
    std::vector<std::vector<float>> out(threads.size(), std::vector<float>(p.q_size()));
    auto call = [&](size_t ti, int cp) {
      maskattn::Options o = base;
      o.threads = threads[ti];
      maskattn::attention(maskattn::bhld<const float>(q[size_t(cp)].data(), p.B, p.Hq, p.Lq, p.D),
                          maskattn::bhld<const float>(k[size_t(cp)].data(), p.B, p.Hkv, p.Lk, p.D),
                          maskattn::bhld<const float>(v[size_t(cp)].data(), p.B, p.Hkv, p.Lk, p.D),
                          maskattn::bhld(out[ti].data(), p.B, p.Hq, p.Lq, p.D), o);
    };
    std::vector<int> used(threads.size());
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      maskattn::Stats st;
      maskattn::Options o = base;
      o.threads = threads[ti];
      o.stats = &st;
      maskattn::attention(maskattn::bhld<const float>(q[0].data(), p.B, p.Hq, p.Lq, p.D),
                          maskattn::bhld<const float>(k[0].data(), p.B, p.Hkv, p.Lk, p.D),
                          maskattn::bhld<const float>(v[0].data(), p.B, p.Hkv, p.Lk, p.D),
                          maskattn::bhld(out[ti].data(), p.B, p.Hq, p.Lq, p.D), o);
      used[ti] = st.threads_used;
    }
    std::vector<bool> same(threads.size(), true);
    for (size_t ti = 1; ti < threads.size(); ++ti) {
      same[ti] = std::memcmp(out[ti].data(), out[0].data(), out[0].size() * sizeof(float)) == 0;
      mismatches += !same[ti];
    }

    std::vector<std::vector<double>> secs(threads.size());
    std::vector<size_t> order(threads.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937 rng(7);
    int call_no = 0, reps = 0;
    const auto start = clock_type::now();
    while (reps < 300 && (reps < 7 || std::chrono::duration<double>(clock_type::now() - start).count() < budget)) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t ti : order) {
        std::this_thread::sleep_for(std::chrono::microseconds(500));
        const auto w0 = clock_type::now();
        for (int w = 0; w < 3 && (w == 0 || clock_type::now() - w0 < std::chrono::milliseconds(2)); ++w)
          call(ti, call_no++ % copies);
        const auto t0 = clock_type::now();
        call(ti, call_no++ % copies);
        secs[ti].push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
      }
      ++reps;
    }
    const double one = median(secs[0]);
    std::printf("#%-3s %-40s", c.id.c_str(), c.name.c_str());
    js << (first_case ? "" : ",") << "\n  {\"id\": \"" << c.id << "\", \"name\": \"" << c.name << "\", \"results\": [";
    first_case = false;
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      const double m = median(secs[ti]), speedup = one / m, eff = speedup / threads[ti];
      std::printf(" | %8.3f %7.2fx %4.0f%%%s", m * 1e3, speedup, 100 * eff, same[ti] ? "" : "!");
      js << (ti ? ", " : "") << "{\"threads\": " << threads[ti] << ", \"threads_used\": " << used[ti]
         << ", \"median_ms\": " << m * 1e3 << ", \"speedup\": " << speedup << ", \"efficiency\": " << eff
         << ", \"bitwise_equal_to_1T\": " << (same[ti] ? "true" : "false") << "}";
    }
    js << "]}";
    std::printf("\n%-45s", "     threads used");
    for (size_t ti = 0; ti < threads.size(); ++ti) std::printf(" | %24d", used[ti]);
    std::printf("\n");
    std::fflush(stdout);
  }
  js << "\n]}\n";
  if (mismatches) std::printf("! output differs from the 1-thread output (%d case/thread pairs)\n", mismatches);
  if (!json_path.empty()) std::ofstream(json_path) << js.str();
  return mismatches ? 1 : 0;
}
