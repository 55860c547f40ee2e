// Compiled with -mavx2 -mfma: 8 lanes with fused multiply-add.
#define MASKATTN_KERNEL_NS avx2
#include "kernel/run.hpp"

namespace maskattn::detail {
void attention_avx2(const Problem& p) { run_attention<xsimd::fma3<xsimd::avx2>>(p); }
}  // namespace maskattn::detail
