// The machine's fp32 FMA peak: independent FMA chains in registers on 1 and 2 threads (the
// ceiling the kernel's GFLOP/s is compared with; maskattn_bench measures the same). Prints GFLOP/s.
#include <cstdio>

#include "probes.hpp"

int main() {
  const long iters = 200000000;
  std::printf("fp32 FMA peak, one core: %.1f GFLOP/s\n", probes::fma_peak_gflops(1, iters, 3));
  std::printf("fp32 FMA peak, two threads: %.1f GFLOP/s\n", probes::fma_peak_gflops(2, iters, 3));
}
