// AArch64 NEON (Advanced SIMD): 4 lanes with fused multiply-add, 32 vector registers. NEON is
// part of the aarch64 baseline, so this file needs no extra flags and the kernel needs no
// run-time check.
#define MASKATTN_KERNEL_NS neon64
#include "kernel/run.hpp"

#if !defined(__aarch64__) || !XSIMD_WITH_NEON64
#error "kernel_neon64.cpp is for aarch64 (xsimd neon64)"
#endif

namespace maskattn::detail {
void attention_neon64(const Problem& p) { run_attention<xsimd::neon64>(p); }
}  // namespace maskattn::detail
