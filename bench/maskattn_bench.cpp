// Native benchmark: maskattn against peers in the same process (OpenBLAS, Eigen, oneDNN), fp32,
// at 1 and 2 threads, on the cases the project is held to (prefill, masks, decode).
//
//   maskattn_bench [--quick] [--json FILE] [--case ID[,ID...]] [--threads 1,2] [--target NAME]
//                  [--peers openblas,eigen,onednn] [--budget SECONDS] [--gap-ms MS] [--warm N]
//                  [--spin-us US] [--idle-cpu]
//
// --spin-us: maskattn's pool spin (ThreadPoolConfig::spin_us). --idle-cpu: after each case, the CPU
// time the process burns in the 20 ms after one call of each implementation (idle workers spinning),
// median of 5 (sleeping 40 ms before each so the previous call's spin is over).
//
// Method (the machine is shared and noisy): every (implementation, thread count) pair of a case
// is measured in turn, in a new random order each repetition: a short pause (so no library's idle
// workers still spin on a core), untimed calls (one, or up to --warm while they take under 2 ms, so
// the implementation's own threads are awake), then the timed call. Each call reads the next of
// 2-4 copies of the inputs (so a decode call never finds its K/V in cache from the previous call);
// the figure is the median per pair. Each peer's output is checked once against maskattn's (max
// abs diff <= 1e-3, else the case is aborted). Decode cases report GB/s of the K and V bytes they
// must read (valid keys, kv heads) against the measured read bandwidth; prefill cases report
// GFLOP/s (4·D flops per allowed pair) against the measured FMA peak. Table on stdout, progress on
// stderr, every figure in the JSON file (--json).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <maskattn/maskattn.hpp>

#include "cases.hpp"
#include "peers/problem.hpp"
#include "probes.hpp"
#include "stats.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using bench::CaseDef;
using bench::Rng;
using bench::allowed_pairs;
using bench::kv_bytes;
using bench::make_cases;
using bench::median;
using bench::parse_list;

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      std::string m = c == std::string::npos ? line : line.substr(c + 1);
      m.erase(0, m.find_first_not_of(" \t"));
      return m;
    }
  return "unknown CPU";
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) o += ' ';
    else o += ch;
  }
  return o + "\"";
}
std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}


struct Impl {
  std::string name;  // "maskattn" or a peer's name
  int threads = 1;
  bool ours = false;
  std::function<void(int copy)> call;
  float* out = nullptr;  // where call() writes
  std::vector<double> seconds;
  double max_diff = 0;
};

struct Result {  // one (impl, threads) of a case, for the table and JSON
  std::string impl;
  int threads;
  double median_s, min_s;
  int reps;
  double max_diff;
};

std::vector<int> parse_ints(const char* s) {
  std::vector<int> v;
  for (const std::string& item : parse_list(s)) v.push_back(std::atoi(item.c_str()));
  return v;
}

void usage() {
  std::fprintf(stderr,
               "usage: maskattn_bench [--quick] [--json FILE] [--case ID[,ID...]] [--threads 1,2] [--target NAME]\n"
               "                      [--peers openblas,eigen,onednn] [--budget SECONDS] [--gap-ms MS] [--warm N]\n"
               "                      [--spin-us US] [--idle-cpu]\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Idle workers of the peers' thread pools spin before they sleep (OpenBLAS: 2^28 cycles, about
  // 0.1 s; GNU OpenMP: 300000 pauses, about 8 ms on the Zen CPU this was written on), which would
  // take a core from the next measured call. Shorten both to under the pause between calls, once,
  // by running again with the settings in the environment (a user's own settings win).
  if (!std::getenv("MASKATTN_BENCH_REEXEC")) {
    setenv("MASKATTN_BENCH_REEXEC", "1", 1);
    setenv("OPENBLAS_THREAD_TIMEOUT", "20", 0);  // 2^20 cycles: about 0.4 ms
    setenv("GOMP_SPINCOUNT", "20000", 0);        // about 0.5 ms
    execv("/proc/self/exe", argv);  // if it fails, carry on with the defaults
  }

  bool quick = false;
  std::string json_path;
  std::vector<std::string> only_cases;
  std::vector<std::string> only_peers = {"openblas", "eigen", "onednn"};
  std::vector<int> thread_counts = {1, 2};
  maskattn::Target target = maskattn::Target::automatic;
  double budget = -1, gap_ms = 1.0;
  int warm = 3;
  bool idle_cpu = false;
  for (int a = 1; a < argc; ++a) {
    const char* arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (!std::strcmp(arg, "--quick")) quick = true;
    else if (!std::strcmp(arg, "--json") && has_value) json_path = argv[++a];
    else if (!std::strcmp(arg, "--case") && has_value) only_cases = parse_list(argv[++a]);
    else if (!std::strcmp(arg, "--peers") && has_value) only_peers = parse_list(argv[++a]);
    else if (!std::strcmp(arg, "--threads") && has_value) thread_counts = parse_ints(argv[++a]);
    else if (!std::strcmp(arg, "--budget") && has_value) budget = std::atof(argv[++a]);
    else if (!std::strcmp(arg, "--gap-ms") && has_value) gap_ms = std::atof(argv[++a]);
    else if (!std::strcmp(arg, "--warm") && has_value) warm = std::atoi(argv[++a]);
    else if (!std::strcmp(arg, "--idle-cpu")) idle_cpu = true;
    else if (!std::strcmp(arg, "--spin-us") && has_value) {
      try {
        maskattn::set_thread_pool_config({std::atof(argv[++a])});
      } catch (const maskattn::ArgumentError& e) {
        std::fprintf(stderr, "--spin-us: %s\n", e.what());
        return 2;
      }
    }
    else if (!std::strcmp(arg, "--target") && has_value) {
      const std::string name = argv[++a];
      bool found = false;
      for (maskattn::Target t : {maskattn::Target::automatic, maskattn::Target::reference})
        if (name == maskattn::target_name(t)) target = t, found = true;
      for (maskattn::Target t : maskattn::kKernelTargets)
        if (name == maskattn::target_name(t)) target = t, found = true;
      if (!found || !maskattn::target_available(target)) {
        std::fprintf(stderr, "target '%s' is not available here\n", name.c_str());
        return 2;
      }
    } else {
      usage();
      return !std::strcmp(arg, "--help") || !std::strcmp(arg, "-h") ? 0 : 2;
    }
  }
  if (thread_counts.empty()) thread_counts = {1};
  if (budget < 0) budget = quick ? 0.3 : 3.0;
  const int min_reps = quick ? 3 : 7, max_reps = quick ? 15 : 300;
  const maskattn::Target resolved = target == maskattn::Target::automatic ? maskattn::best_target() : target;

  // ---------------------------------------------------------------- machine and ceilings
  const std::string cpu = cpu_model();
  const unsigned cores = std::thread::hardware_concurrency();
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  std::fprintf(stderr, "maskattn_bench %s: %s, %u cores, %s%s\n", maskattn::version(), cpu.c_str(), cores, date,
               quick ? " (quick)" : "");

  std::vector<double> peak(thread_counts.size()), bw_best(thread_counts.size()), bw_median(thread_counts.size());
  {
    std::fprintf(stderr, "probe: fp32 FMA peak ...\n");
    for (size_t t = 0; t < thread_counts.size(); ++t)
      peak[t] = probes::fma_peak_gflops(thread_counts[t], quick ? 40000000L : 150000000L, quick ? 2 : 3);
    const size_t bytes = size_t(quick ? 256 : 512) << 20;
    std::fprintf(stderr, "probe: read bandwidth (%zu MiB buffer) ...\n", bytes >> 20);
    std::vector<float> buf(bytes / sizeof(float), 1.0f);
    for (size_t t = 0; t < thread_counts.size(); ++t) {
      const probes::Bandwidth b = probes::read_bandwidth(buf.data(), buf.size(), thread_counts[t], quick ? 5 : 11);
      bw_best[t] = b.best_gbs;
      bw_median[t] = b.median_gbs;
    }
  }

  std::printf("maskattn %s (target %s) vs peers in the same process; %s, %u cores; %s\n", maskattn::version(),
              maskattn::target_name(resolved), cpu.c_str(), cores, date);
  std::printf("method: median of interleaved calls (shuffled order; before each: %.1f ms pause, 1-%d untimed calls),\n"
              "        inputs rotated over 2-4 copies%s\n",
              gap_ms, warm, quick ? "; QUICK run (few repetitions)" : "");
  for (size_t t = 0; t < thread_counts.size(); ++t)
    std::printf("ceilings, %d thread%s: fp32 FMA peak %.1f GFLOP/s; read bandwidth %.1f GB/s best, %.1f median\n",
                thread_counts[t], thread_counts[t] > 1 ? "s" : " ", peak[t], bw_best[t], bw_median[t]);
  std::printf("prefill rows: GFLOP/s (4*D per allowed pair) and %% of FMA peak; decode rows: GB/s of the K+V bytes\n"
              "needed (valid keys, kv heads) and %% of read bandwidth; ratio = fastest peer time / maskattn time\n\n");
  std::string head = "case / impl                                  ";
  for (int t : thread_counts) {
    char b[64];
    std::snprintf(b, sizeof b, " | %dT ms/call    rate     %%", t);
    head += b;
  }
  std::printf("%s\n", head.c_str());

  std::ostringstream js;
  js << "{\n  \"machine\": {\"cpu\": " << json_str(cpu) << ", \"cores\": " << cores << ", \"date\": " << json_str(date)
     << "},\n  \"maskattn\": {\"version\": " << json_str(maskattn::version()) << ", \"target\": "
     << json_str(maskattn::target_name(resolved)) << "},\n  \"quick\": " << (quick ? "true" : "false")
     << ",\n  \"ceilings\": [";
  for (size_t t = 0; t < thread_counts.size(); ++t)
    js << (t ? ", " : "") << "{\"threads\": " << thread_counts[t] << ", \"fma_peak_gflops\": " << num(peak[t])
       << ", \"read_bw_best_gbs\": " << num(bw_best[t]) << ", \"read_bw_median_gbs\": " << num(bw_median[t]) << "}";
  js << "],\n  \"cases\": [";

  // ---------------------------------------------------------------- cases
  std::vector<CaseDef> cases = make_cases();
  if (!only_cases.empty())
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const CaseDef& c) {
                                 return std::find(only_cases.begin(), only_cases.end(), c.id) == only_cases.end();
                               }),
                cases.end());
  int failures = 0;
  std::vector<std::string> peer_notes;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const CaseDef& c = cases[ci];
    const peers::Problem& p = c.p;
    const auto case_start = clock_type::now();
    const double pairs = allowed_pairs(p), flops = 4.0 * p.D * pairs, bytes = kv_bytes(p);
    const size_t copy_bytes = (p.q_size() + 2 * p.kv_size()) * sizeof(float);
    const int copies = int(std::clamp<size_t>((size_t(128) << 20) / copy_bytes + 1, 2, 4));
    std::fprintf(stderr, "[%zu/%zu] #%s %s: %d copies of %.1f MiB of inputs\n", ci + 1, cases.size(), c.id.c_str(),
                 c.name.c_str(), copies, copy_bytes / 1048576.0);

    std::vector<std::vector<float>> q(static_cast<size_t>(copies)), k(q.size()), v(q.size());
    {
      Rng r(1000 + ci);
      q[0].resize(p.q_size());
      k[0].resize(p.kv_size());
      v[0].resize(p.kv_size());
      for (auto* t : {&q[0], &k[0], &v[0]})
        for (float& x : *t) x = r.uniform();
      for (int i = 1; i < copies; ++i) q[size_t(i)] = q[0], k[size_t(i)] = k[0], v[size_t(i)] = v[0];
    }

    // The implementations of this case.
    std::vector<std::unique_ptr<peers::Peer>> peer_objs;
    std::vector<std::string> notes;
    for (const std::string& name : only_peers) {
      std::string why;
      std::unique_ptr<peers::Peer> pr;
      if (name == "openblas") pr = peers::make_openblas_peer(p, &why);
      else if (name == "eigen") pr = peers::make_eigen_peer(p, &why);
      else if (name == "onednn") pr = peers::make_dnnl_peer(p, thread_counts, &why);
      else why = "unknown peer (known: openblas, eigen, onednn)";
      if (pr) peer_objs.push_back(std::move(pr));
      else notes.push_back(name + ": " + why);
    }
    for (auto& pr : peer_objs) {
      const std::string d = pr->detail();
      if (!d.empty()) std::fprintf(stderr, "  %s: %s\n", pr->name().c_str(), d.c_str());
      if (ci == 0 && !d.empty()) peer_notes.push_back(pr->name() + ": " + d);
    }
    for (const auto& n : notes) std::fprintf(stderr, "  %s\n", n.c_str());

    std::vector<std::vector<float>> outs;
    std::vector<Impl> impls;
    maskattn::Options base;
    base.causal = p.causal;
    base.target = target;
    if (!p.key_lengths.empty()) base.key_lengths = maskattn::Span<int32_t>(p.key_lengths);
    if (!p.allowed.empty()) base.allowed = maskattn::make_mask(p.allowed.data(), p.B, p.Hq, p.Lq, p.Lk);
    const size_t n_impls = thread_counts.size() * (1 + peer_objs.size());
    outs.assign(n_impls, std::vector<float>(p.q_size(), 0.0f));
    for (int t : thread_counts) {
      Impl m;
      m.name = "maskattn";
      m.threads = t;
      m.ours = true;
      m.out = outs[impls.size()].data();
      maskattn::Options opt = base;
      opt.threads = t;
      float* out = m.out;
      m.call = [&, opt, out](int cp) {
        maskattn::attention(maskattn::bhld(q[size_t(cp)].data(), p.B, p.Hq, p.Lq, p.D),
                            maskattn::bhld(k[size_t(cp)].data(), p.B, p.Hkv, p.Lk, p.D),
                            maskattn::bhld(v[size_t(cp)].data(), p.B, p.Hkv, p.Lk, p.D),
                            maskattn::bhld(out, p.B, p.Hq, p.Lq, p.D), opt);
      };
      impls.push_back(std::move(m));
      for (auto& pr : peer_objs) {
        Impl e;
        e.name = pr->name();
        e.threads = t;
        e.out = outs[impls.size()].data();
        peers::Peer* peer = pr.get();
        float* pout = e.out;
        e.call = [&, peer, t, pout](int cp) {
          peer->run(t, q[size_t(cp)].data(), k[size_t(cp)].data(), v[size_t(cp)].data(), pout);
        };
        impls.push_back(std::move(e));
      }
    }

    // Warm-up call of each on copy 0, and the check against maskattn's output (first thread count).
    std::string abort_reason;
    for (Impl& im : impls) {
      try {
        im.call(0);
      } catch (const std::exception& e) {
        abort_reason = im.name + " (" + std::to_string(im.threads) + "T) failed: " + e.what();
        break;
      }
      double d = 0;
      for (size_t i = 0; i < p.q_size(); ++i) {
        const double diff = std::fabs(double(im.out[i]) - double(impls[0].out[i]));
        d = std::isnan(diff) ? INFINITY : std::max(d, diff);
      }
      im.max_diff = d;
      if (!(d <= 1e-3)) {
        char b[160];
        std::snprintf(b, sizeof b, "%s (%dT) differs from maskattn by %.3g (> 1e-3)", im.name.c_str(), im.threads, d);
        abort_reason = b;
        break;
      }
    }
    if (!abort_reason.empty()) {
      ++failures;
      std::fprintf(stderr, "  ABORTED: %s\n", abort_reason.c_str());
      std::printf("#%-3s %-40s ABORTED: %s\n", c.id.c_str(), c.name.c_str(), abort_reason.c_str());
      js << (ci ? "," : "") << "\n    {\"id\": " << json_str(c.id) << ", \"name\": " << json_str(c.name)
         << ", \"error\": " << json_str(abort_reason) << "}";
      continue;
    }

    // What maskattn did (kernel, threads, tiles), from one more call per thread count.
    std::string ours_info;
    for (const Impl& im : impls) {
      if (!im.ours) continue;
      maskattn::Options opt = base;
      opt.threads = im.threads;
      maskattn::Stats st;
      opt.stats = &st;
      maskattn::attention(maskattn::bhld(q[0].data(), p.B, p.Hq, p.Lq, p.D), maskattn::bhld(k[0].data(), p.B, p.Hkv, p.Lk, p.D),
                          maskattn::bhld(v[0].data(), p.B, p.Hkv, p.Lk, p.D), maskattn::bhld(im.out, p.B, p.Hq, p.Lq, p.D), opt);
      char b[200];
      std::snprintf(b, sizeof b, "%s{\"threads\": %d, \"threads_used\": %d, \"tiles_skipped\": %lld, \"tiles_full\": %lld, \"tiles_mixed\": %lld}",
                    ours_info.empty() ? "" : ", ", im.threads, st.threads_used, (long long)st.tiles_skipped,
                    (long long)st.tiles_full, (long long)st.tiles_mixed);
      ours_info += b;
      std::fprintf(stderr, "  maskattn %dT: %s kernel, %d thread(s) used, tiles skipped %lld, full %lld, mixed %lld\n", im.threads,
                   p.group() * p.Lq <= maskattn::decode_max_rows() ? "decode" : "prefill", st.threads_used,
                   (long long)st.tiles_skipped, (long long)st.tiles_full, (long long)st.tiles_mixed);
    }

    // Interleaved, rotating measurement.
    int reps = 0, call_no = 0;
    std::vector<size_t> order(impls.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937 shuffle_rng(unsigned(ci) + 1);
    const auto t_start = clock_type::now();
    for (;;) {
      const double elapsed = std::chrono::duration<double>(clock_type::now() - t_start).count();
      if (reps >= max_reps || (reps >= min_reps && elapsed >= budget)) break;
      std::shuffle(order.begin(), order.end(), shuffle_rng);  // a new order (and neighbours) each time
      for (size_t s = 0; s < impls.size(); ++s) {
        Impl& im = impls[order[s]];
        if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
        // Untimed calls first (at least one; more, up to --warm, while they take under 2 ms): the
        // implementation's threads are awake and its state is steady when the timed call starts.
        const auto w0 = clock_type::now();
        for (int w = 0; w < warm && (w == 0 || clock_type::now() - w0 < std::chrono::milliseconds(2)); ++w)
          im.call(call_no++ % copies);
        const int cp = call_no++ % copies;
        const auto t0 = clock_type::now();
        im.call(cp);
        im.seconds.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
      }
      ++reps;
    }
    std::fprintf(stderr, "  %d repetitions, %.1f s\n", reps,
                 std::chrono::duration<double>(clock_type::now() - case_start).count());
    if (idle_cpu) {
      const auto cpu_now = [] {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
      };
      for (Impl& im : impls) {
        std::vector<double> us;
        for (int r = 0; r < 5; ++r) {
          std::this_thread::sleep_for(std::chrono::milliseconds(40));
          im.call(0);
          const double c0 = cpu_now();
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          us.push_back(cpu_now() - c0);
        }
        std::printf("#%-3s idle CPU in the 20 ms after a call: %-8s %dT %7.0f us (median of 5; spin_us %.0f)\n", c.id.c_str(),
                    im.name.c_str(), im.threads, median(us), maskattn::thread_pool_config().spin_us);
      }
    }

    // Table rows and JSON.
    std::vector<Result> results;
    for (const Impl& im : impls)
      results.push_back({im.name, im.threads, median(im.seconds), *std::min_element(im.seconds.begin(), im.seconds.end()),
                         int(im.seconds.size()), im.max_diff});
    auto find = [&](const std::string& name, int t) -> const Result* {
      for (const Result& r : results)
        if (r.impl == name && r.threads == t) return &r;
      return nullptr;
    };
    auto metric = [&](const Result& r, size_t ti) {
      const double rate = c.decode ? bytes / r.median_s * 1e-9 : flops / r.median_s * 1e-9;
      const double pct = 100.0 * rate / (c.decode ? bw_best[ti] : peak[ti]);
      return std::make_pair(rate, pct);
    };
    std::printf("#%-3s %-40s %s\n", c.id.c_str(), c.name.c_str(),
                c.decode ? "[decode: GB/s, % of read bw]" : "[prefill: GFLOP/s, % of FMA peak]");
    std::vector<std::string> names = {"maskattn"};
    for (auto& pr : peer_objs) names.push_back(pr->name());
    for (const std::string& nm : names) {
      std::string line = "       " + nm;
      line.resize(45, ' ');
      for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
        const Result* r = find(nm, thread_counts[ti]);
        const auto [rate, pct] = metric(*r, ti);
        char b[80];
        std::snprintf(b, sizeof b, " | %11.3f %8.1f %4.0f%%", r->median_s * 1e3, rate, pct);
        line += b;
      }
      std::printf("%s\n", line.c_str());
    }
    std::string ratio_line = "       ratio (fastest peer / maskattn)";
    ratio_line.resize(45, ' ');
    std::vector<std::pair<std::string, double>> ratios;
    for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
      const Result* ours = find("maskattn", thread_counts[ti]);
      const Result* best = nullptr;
      for (const Result& r : results)
        if (r.impl != "maskattn" && r.threads == thread_counts[ti] && (!best || r.median_s < best->median_s)) best = &r;
      char b[80];
      if (best) {
        ratios.push_back({best->impl, best->median_s / ours->median_s});
        std::snprintf(b, sizeof b, " | %10.2fx %15s", best->median_s / ours->median_s, best->impl.c_str());
      } else {
        ratios.push_back({"", NAN});
        std::snprintf(b, sizeof b, " | %27s", "(no peer)");
      }
      ratio_line += b;
    }
    std::printf("%s\n", ratio_line.c_str());
    std::fflush(stdout);

    js << (ci ? "," : "") << "\n    {\"id\": " << json_str(c.id) << ", \"name\": " << json_str(c.name)
       << ", \"kind\": " << json_str(c.decode ? "decode" : "prefill") << ", \"mask\": " << json_str(c.mask)
       << ", \"shape\": {\"B\": " << p.B << ", \"Hq\": " << p.Hq << ", \"Hkv\": " << p.Hkv << ", \"Lq\": " << p.Lq
       << ", \"Lk\": " << p.Lk << ", \"D\": " << p.D << ", \"causal\": " << (p.causal ? "true" : "false")
       << ", \"key_lengths\": [";
    for (size_t b = 0; b < p.key_lengths.size(); ++b) js << (b ? ", " : "") << p.key_lengths[b];
    js << "]}, \"allowed_pairs\": " << num(pairs) << ", \"flops\": " << num(flops) << ", \"kv_bytes\": " << num(bytes)
       << ", \"copies\": " << copies << ", \"repetitions\": " << reps << ",\n     \"maskattn_kernel\": "
       << json_str(p.group() * p.Lq <= maskattn::decode_max_rows() ? "decode" : "prefill") << ", \"maskattn_stats\": ["
       << ours_info << "], \"notes\": [";
    for (size_t n = 0; n < notes.size(); ++n) js << (n ? ", " : "") << json_str(notes[n]);
    js << "],\n     \"results\": [";
    for (size_t r = 0; r < results.size(); ++r) {
      const Result& x = results[r];
      const size_t ti = size_t(std::find(thread_counts.begin(), thread_counts.end(), x.threads) - thread_counts.begin());
      const auto [rate, pct] = metric(x, ti);
      js << (r ? "," : "") << "\n       {\"impl\": " << json_str(x.impl) << ", \"threads\": " << x.threads
         << ", \"median_ms\": " << num(x.median_s * 1e3) << ", \"min_ms\": " << num(x.min_s * 1e3)
         << ", \"calls\": " << x.reps << ", \"max_abs_diff\": " << num(x.max_diff)
         << ", \"gflops\": " << num(flops / x.median_s * 1e-9) << ", \"gbs\": " << num(bytes / x.median_s * 1e-9)
         << ", \"" << (c.decode ? "pct_read_bw" : "pct_fma_peak") << "\": " << num(pct) << "}";
      (void)rate;
    }
    js << "],\n     \"ratio\": [";
    for (size_t ti = 0; ti < thread_counts.size(); ++ti)
      js << (ti ? ", " : "") << "{\"threads\": " << thread_counts[ti] << ", \"fastest_peer\": " << json_str(ratios[ti].first)
         << ", \"peer_over_maskattn\": " << num(ratios[ti].second) << "}";
    js << "]}";
  }
  js << "\n  ],\n  \"peers\": [";
  for (size_t n = 0; n < peer_notes.size(); ++n) js << (n ? ", " : "") << json_str(peer_notes[n]);
  js << "]\n}\n";

  std::printf("\npeers: ");
  for (size_t n = 0; n < peer_notes.size(); ++n) std::printf("%s%s", n ? "\n       " : "", peer_notes[n].c_str());
  std::printf("\n");
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << js.str();
    if (!f) {
      std::fprintf(stderr, "could not write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %s\n", json_path.c_str());
  }
  return failures ? 1 : 0;
}
