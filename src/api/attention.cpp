// The public entry point: validate everything, then run the chosen implementation.
#include <memory>

#include "problem/problem.hpp"
#include "problem/rope.hpp"
#include "dispatch/targets.hpp"
#include "maskattn/reference.hpp"

namespace maskattn {

void attention(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
               const MutableTensor& out, const Options& options, const ExtraOutputs& extra) {
  detail::Problem p = detail::make_problem(q, k, v, &out, options, extra);
  const Target t = detail::resolve_target(options.target);
  // Nothing to write (Dv = 0, no weights, no lse): done. Empty tensors may have any B and H
  // (q [2^40, 1, 1, 0] is valid), and visiting their rows would take days for no output.
  if (p.Dv == 0 && !p.weights && !p.lse) return;
  if (t != Target::reference) {
    std::unique_ptr<float[]> q_rope, k_rope;  // RoPE: rotated copies of Q and K (the reference rotates its own)
    detail::apply_rope(p, q_rope, k_rope);
    return detail::run_kernel(t, p);
  }
  detail::run_reference(p);
}

}  // namespace maskattn
