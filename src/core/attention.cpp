// The public entry point: validate everything, then run the chosen implementation.
#include <algorithm>

#include "core/problem.hpp"
#include "core/rope.hpp"
#include "dispatch/targets.hpp"
#include "maskattn/reference.hpp"

namespace maskattn {
namespace detail {
ReferenceResult reference_compute(const Problem& p, Precision precision);

// The reference computes into its own buffers first, so output is written only on success.
void run_reference(const Problem& p) {
  const ReferenceResult r = reference_compute(p, Precision::fp64);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.Lq; ++i) {
        const int64_t row = (b * p.Hq + h) * p.Lq + i;
        if (p.Dv == 0) continue;  // no output row (out may be null)
        float* o = p.out + b * p.os.b + h * p.os.h + i * p.os.l;
        for (int64_t c = 0; c < p.Dv; ++c) o[c] = float(r.out[size_t(row * p.Dv + c)]);
      }
  if (p.weights) std::transform(r.weights.begin(), r.weights.end(), p.weights, [](double x) { return float(x); });
  if (p.lse) std::transform(r.lse.begin(), r.lse.end(), p.lse, [](double x) { return float(x); });
}
}  // namespace detail

void attention(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
               const MutableTensor& out, const Options& options, const ExtraOutputs& extra) {
  detail::Problem p = detail::make_problem(q, k, v, &out, options, extra);
  // Nothing to write (Dv = 0, no weights, no lse): done. Empty tensors may have any B and H
  // (q [2^40, 1, 1, 0] is valid), and visiting their rows would take days for no output.
  if (p.Dv == 0 && !p.weights && !p.lse) return;
  const Target t = options.target == Target::automatic ? best_target() : options.target;
  if (t != Target::reference) {
    std::unique_ptr<float[]> q_rope, k_rope;  // RoPE: rotated copies of Q and K (the reference rotates its own)
    detail::apply_rope(p, q_rope, k_rope);
    return detail::run_kernel(t, p);
  }
  detail::run_reference(p);
}

}  // namespace maskattn
