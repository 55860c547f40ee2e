// Small helpers the native benchmarks share: the median of timings and comma-separated arguments.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

// Median (the mean of the two middle values for an even count; 0 for none).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The `[--quick] [--threads N]` arguments several benchmarks take: false (after the usage line on
// stderr) for anything else.
struct QuickThreads {
  bool quick = false;
  int threads = 1;
};
inline bool parse_quick_threads(int argc, char** argv, const char* program, QuickThreads& out) {
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") out.quick = true;
    else if (arg == "--threads" && a + 1 < argc) out.threads = std::atoi(argv[++a]);
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--threads N]\n", program);
      return false;
    }
  }
  return true;
}

// "a,b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> parse_list(const char* s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(item);
  return v;
}

}  // namespace bench
