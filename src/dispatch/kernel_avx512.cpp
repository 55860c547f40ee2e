// Compiled with -mavx512f -mavx512dq -mfma: 16 lanes, 32 registers (larger register-blocked tiles).
#define MASKATTN_KERNEL_NS avx512
#include "kernel/run.hpp"

namespace maskattn::detail {
void attention_avx512(const Problem& p) { run_attention<xsimd::avx512f>(p); }
}  // namespace maskattn::detail
