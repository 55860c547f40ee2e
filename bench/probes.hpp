// Machine ceilings the benchmark's figures are compared with: the fp32 FMA peak (prefill cases are
// compute-bound) and the streaming read bandwidth (decode cases are memory-bound).
#pragma once

#include <cstddef>

namespace probes {

// fp32 FMA GFLOP/s of `threads` threads together running independent FMA chains in registers
// (AVX2, and AVX-512 when the CPU has it: the better of the two), best of `reps` runs.
double fma_peak_gflops(int threads, long iters, int reps);

struct Bandwidth {
  double best_gbs = 0, median_gbs = 0;
};
// Read bandwidth: `threads` threads sum disjoint parts of buf[0, n) (SIMD, several accumulators);
// GB/s = 1e9 bytes per second, over `reps` runs.
Bandwidth read_bandwidth(const float* buf, size_t n, int threads, int reps);
// The same read in the decode step's order, one thread: the two halves of buf[0, n) (K and V)
// in alternating tiles of tile_floats (a 64-key tile of K rows, then of V rows), no compute.
Bandwidth tiled_read_bandwidth(const float* buf, size_t n, size_t tile_floats, int reps);

}  // namespace probes
