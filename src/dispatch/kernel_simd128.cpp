// WebAssembly SIMD128. xsimd 8.1 has no wasm arch: it reaches SIMD128 through Emscripten's SSE
// translation headers (compiled with -msimd128 -msse4.1, xsimd arch sse4_1, 4 lanes).
#include "dispatch/wasm_sse_fixups.hpp"  // must precede xsimd
#define MASKATTN_KERNEL_NS simd128
#include "kernel/run.hpp"

#if !defined(__wasm_simd128__)
#error "kernel_simd128.cpp must be compiled with -msimd128 -msse4.1"
#endif

namespace maskattn::detail {
void attention_simd128(const Problem& p) { run_attention<xsimd::sse4_1>(p); }
}  // namespace maskattn::detail
