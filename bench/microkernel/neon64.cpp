// The micro-kernel probe compiled as the library's neon64 kernel is (aarch64 baseline flags).
// count-instructions.mjs disassembles this file's object for the loops' instruction counts.
#define MASKATTN_KERNEL_NS bench_neon64
#include "probe.hpp"

MicrokernelFigures microkernel_neon64(int d, double seconds) {
  return maskattn::detail::measure_microkernel<xsimd::neon64>(d, seconds);
}
