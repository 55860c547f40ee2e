// The micro-kernel probe compiled with the flags of the library's sse2 kernel (bench/CMakeLists.txt).
#define MASKATTN_KERNEL_NS bench_sse2
#include "probe.hpp"

MicrokernelFigures microkernel_sse2(int d, double seconds) {
  return maskattn::detail::measure_microkernel<xsimd::sse2>(d, seconds);
}
