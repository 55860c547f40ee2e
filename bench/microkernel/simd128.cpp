// The micro-kernel probe compiled as the library's WebAssembly SIMD128 kernel is (xsimd's sse4_1
// through Emscripten's SSE headers, -msimd128 -msse4.1; bench/CMakeLists.txt).
#include "dispatch/wasm_sse_fixups.hpp"  // must precede xsimd
#define MASKATTN_KERNEL_NS bench_simd128
#include "probe.hpp"

MicrokernelFigures microkernel_simd128(int d, double seconds) {
  return maskattn::detail::measure_microkernel<xsimd::sse4_1>(d, seconds);
}
