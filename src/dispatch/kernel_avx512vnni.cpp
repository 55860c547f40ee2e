// Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx512vnni -mfma: the avx512 kernel, whose
// quantized-cache Q·Kᵀ uses vpdpbusd on zmm, two blocks of 32 per instruction (kernel/quant_dot.hpp).
#define MASKATTN_KERNEL_NS avx512vnni
#include "kernel/run.hpp"

namespace maskattn::detail {
void attention_avx512vnni(const Problem& p) { run_attention<xsimd::avx512f>(p); }
}  // namespace maskattn::detail
