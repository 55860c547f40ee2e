// The public entry point: validate everything, then run on the chosen target (dispatch/execute.cpp).
// Semantics: docs/semantics.md, "The computation" and "Bad input".
#include "problem/problem.hpp"
#include "dispatch/targets.hpp"

namespace maskattn {

void attention(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
               const MutableTensor& out, const Options& options, const ExtraOutputs& extra) {
  detail::execute(detail::make_problem(q, k, v, &out, options, extra), options.target);
}

}  // namespace maskattn
