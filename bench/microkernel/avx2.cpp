// The micro-kernel probe compiled with the flags of the library's avx2 kernel (bench/CMakeLists.txt).
#define MASKATTN_KERNEL_NS bench_avx2
#include "probe.hpp"

MicrokernelFigures microkernel_avx2(int d, double seconds) {
  return maskattn::detail::measure_microkernel<xsimd::fma3<xsimd::avx2>>(d, seconds);
}
