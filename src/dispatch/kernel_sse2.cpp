// Compiled with -msse2 (the x86-64 baseline): 4 lanes, no FMA.
#define MASKATTN_KERNEL_NS sse2
#include "kernel/run.hpp"

namespace maskattn::detail {
void attention_sse2(const Problem& p) { run_attention<xsimd::sse2>(p); }
}  // namespace maskattn::detail
