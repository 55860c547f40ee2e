// maskattn_microkernel: the prefill kernel's micro-tiles alone, per compiled architecture, against
// that architecture's FMA peak. One thread; one key tile (KT keys x D) in L1; no softmax, no masks.
//
//   maskattn_microkernel [--d 32,64,128] [--seconds S]
//   maskattn_microkernel --check      (the tests: tiles against float64 at several D, no timing)
//
// Rows in lanes (prefill_kernel.hpp): Q·Kᵀ is NK keys x RV vectors of query rows of accumulators
// across all of D, one broadcast K element per key; P·V adds NK keys' scores times one broadcast V
// element into RV vectors of output per value column. "both" feeds Q·Kᵀ's scores to P·V in
// registers, as the kernel does. Both are checked against a float64
// product before they are timed. The end-to-end kernel's share of the peak (softmax, masks and
// packing included) is maskattn_bench's "% of FMA peak" column. In WebAssembly (Node) this is
// built by the Emscripten bench build (README "Benchmarks").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "figures.hpp"
#include "maskattn/maskattn.hpp"

namespace {

struct Arch {
  const char* name;
  maskattn::Target target;
  MicrokernelFigures (*probe)(int, double);
};

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 1 || v > 1024) {
      std::fprintf(stderr, "maskattn_microkernel: --d: expected a list like 32,64,128, got '%s'\n", s);
      std::exit(2);
    }
    out.push_back(int(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> dims = {32, 64, 128};
  double seconds = 0.5;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check")) {
      check = true;
      dims = {1, 17, 32, 64, 100, 128, 256};
    } else if (!std::strcmp(argv[i], "--d") && i + 1 < argc) {
      dims = parse_list(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0 && seconds < 60)) {
        std::fprintf(stderr, "maskattn_microkernel: --seconds: expected a number in (0, 60)\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: maskattn_microkernel [--d 32,64,128] [--seconds S] | --check\n");
      return 2;
    }
  }
  // The probes this build compiled, widest first (bench/CMakeLists.txt: microkernel_targets.inc).
  std::vector<Arch> archs = {
#define MASKATTN_PROBE(name) {#name, maskattn::Target::name, microkernel_##name},
#include "microkernel_targets.inc"
#undef MASKATTN_PROBE
  };
  std::stable_sort(archs.begin(), archs.end(),
                   [](const Arch& a, const Arch& b) { return maskattn::target_lanes(a.target) > maskattn::target_lanes(b.target); });
#if defined(MASKATTN_MICROKERNEL_RELAXED)
  for (Arch& a : archs)
    if (a.target == maskattn::Target::simd128) a.name = "simd128+relaxed";
#endif
  if (check) {
    int failures = 0, checked = 0;
    for (const Arch& a : archs) {
      if (!maskattn::target_available(a.target)) continue;
      for (int d : dims) {
        const MicrokernelFigures f = a.probe(d, 0);
        const bool ok = f.max_rel_error <= f.error_bound;
        failures += !ok;
        ++checked;
        std::printf("%-15s D = %3d: max relative error %.1e (bound %.1e) %s\n", a.name, d, f.max_rel_error, f.error_bound,
                    ok ? "ok" : "WRONG");
      }
    }
    if (!checked) std::printf("no SIMD target compiled in and supported: nothing to check\n");
    return failures ? 1 : 0;
  }
  std::printf("prefill micro-tiles, one thread, one key tile in L1: GFLOP/s and %% of the same ISA's multiply-add peak\n");
  std::printf("%-15s %-12s %4s %10s %16s %16s %16s %10s\n", "target", "tile", "D", "peak", "Q.K^T", "P.V", "both", "max err");
  int failures = 0;
  for (const Arch& a : archs) {
    if (!maskattn::target_available(a.target)) {
      std::printf("%-15s (not supported by this CPU)\n", a.name);
      continue;
    }
    // One short untimed pass first: in Node, a wasm function runs as first compiled until it is
    // entered again after V8's optimised code is ready (the first D measured 4x too slow without it).
    a.probe(dims.front(), 0.05);
    for (int d : dims) {
      std::fprintf(stderr, "measuring %s, D = %d ...\n", a.name, d);
      const MicrokernelFigures f = a.probe(d, seconds);
      const std::string tile = std::to_string(f.mr) + "x" + std::to_string(f.nv) + "x" + std::to_string(f.lanes) +
                               "/" + std::to_string(f.kt);
      auto cell = [&](double g) {
        char b[32];
        std::snprintf(b, sizeof b, "%6.1f (%3.0f%%)", g, 100.0 * g / f.peak_gflops);
        return std::string(b);
      };
      const bool ok = f.max_rel_error <= f.error_bound;
      failures += !ok;
      std::printf("%-15s %-12s %4d %10.1f %16s %16s %16s %10.1e%s\n", a.name, tile.c_str(), d, f.peak_gflops,
                  cell(f.qk_gflops).c_str(), cell(f.pv_gflops).c_str(), cell(f.both_gflops).c_str(), f.max_rel_error, ok ? "" : "  WRONG");
    }
  }
  std::printf("tile: NK keys x RV vectors x lanes (query rows) / KT keys per tile; peak: independent a = a*x + y chains "
              "(fused where the ISA has FMA, else mul + add)\n");
  return failures ? 1 : 0;
}
