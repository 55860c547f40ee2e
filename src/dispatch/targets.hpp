// The kernels compiled into this build, one function per architecture (each defined in its own
// translation unit compiled with that architecture's flags), and run-time selection among them.
#pragma once

#include <string>

#include "problem/problem.hpp"

namespace maskattn::detail {

void attention_scalar(const Problem& p);
#if defined(MASKATTN_WITH_SSE2)
void attention_sse2(const Problem& p);
#endif
#if defined(MASKATTN_WITH_AVX2)
void attention_avx2(const Problem& p);
#endif
#if defined(MASKATTN_WITH_AVX512)
void attention_avx512(const Problem& p);
#endif
#if defined(MASKATTN_WITH_AVX512VNNI)
void attention_avx512vnni(const Problem& p);
#endif
#if defined(MASKATTN_WITH_SIMD128)
void attention_simd128(const Problem& p);
#endif
#if defined(MASKATTN_WITH_NEON64)
void attention_neon64(const Problem& p);
#endif

// Runs the kernel of target t (not `automatic`, not `reference`).
void run_kernel(Target t, const Problem& p);
// Runs the float64 reference on a validated problem and writes its outputs.
void run_reference(const Problem& p);
// The target a call runs on: `requested`, or for `automatic` the best this CPU runs. A target not
// compiled in or not supported by this CPU is an ArgumentError naming "target" (checked before
// anything is written).
Target resolve_target(Target requested);
// "scalar, sse2, avx2" etc.
std::string compiled_targets_string();

}  // namespace maskattn::detail
