// The kernels compiled into this build, one function per target (each defined in its own
// translation unit compiled with that target's flags), and run-time selection among them.
#pragma once

#include <string>

#include "problem/problem.hpp"

namespace maskattn::detail {

// One kernel function per row of maskattn/targets.inc; a build defines those it compiles (the
// translation units CMakeLists.txt makes from dispatch/kernel.cpp.in).
#define MASKATTN_TARGET(name, ...) void attention_##name(const Problem& p);
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET

// Runs a validated problem on the requested target (resolve_target's rules): the kernel, with fused
// RoPE, or the float64 reference. Every entry point ends here (dispatch/execute.cpp).
void execute(Problem p, Target requested);
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
