// Integer dot products of the scalar target: the scalar definitions (kernel/quant_dot.hpp), and
// dequantization through memory.
#pragma once

#include "kernel/quant_dot.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <>
struct QuantDot<ScalarArch> : QuantDotScalar, DequantThroughMemory<Simd<ScalarArch>> {};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
