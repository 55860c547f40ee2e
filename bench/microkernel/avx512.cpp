// The micro-kernel probe compiled with the flags of the library's avx512 kernel (bench/CMakeLists.txt).
#define MASKATTN_KERNEL_NS bench_avx512
#include "probe.hpp"

MicrokernelFigures microkernel_avx512(int d, double seconds) {
  return maskattn::detail::measure_microkernel<xsimd::avx512f>(d, seconds);
}
