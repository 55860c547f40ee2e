// What bench/microkernel measures for one architecture: the prefill kernel's two micro-tiles
// (Q·Kᵀ and P·V) timed alone over one key tile in L1, beside that architecture's FMA peak measured
// with the same multiply-add the kernel uses. Each architecture's probe is compiled in its own file
// with that architecture's flags (as the library's kernels are), and declared here.
#pragma once

struct MicrokernelFigures {
  int lanes = 0, mr = 0, nv = 0, kt = 0;  // register tile: mr keys x nv vectors of `lanes` query rows; KT keys per tile
  double peak_gflops = 0;                 // independent multiply-add chains in registers, no loads
  double qk_gflops = 0, pv_gflops = 0, both_gflops = 0;
  // The tiles' scores and outputs against a float64 product, relative to the sum of the terms'
  // magnitudes (checked before timing), and the rounding bound it must stay within.
  double max_rel_error = 0, error_bound = 0;
};

// d: head dimension (= Dv); seconds: time spent per figure (the median of 5 timed runs); 0 = only
// the check against float64, no timing.
// One probe function per row of the target table; a build defines those whose probe it compiles
// (bench/CMakeLists.txt: microkernel_targets.inc).
#include "maskattn/maskattn.hpp"
#define MASKATTN_TARGET(name, ...) MicrokernelFigures microkernel_##name(int d, double seconds);
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET
