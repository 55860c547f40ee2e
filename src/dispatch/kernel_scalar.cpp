// The kernel on plain float: WebAssembly engines without SIMD128, and a native cross-check.
#define MASKATTN_KERNEL_NS scalar
#include "kernel/run.hpp"

namespace maskattn::detail {
void attention_scalar(const Problem& p) { run_attention<ScalarArch>(p); }
}  // namespace maskattn::detail
