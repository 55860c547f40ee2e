// The README's C++ example: causal attention with key padding on a small batch, checked against
// the double-precision reference. Built and run by the tests (natively and under Node).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <maskattn/maskattn.hpp>
#include <maskattn/reference.hpp>

int main(int argc, char** argv) {
  const int B = 2, H = 2, L = 5, D = 4;
  std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), out(q.size());
  for (size_t n = 0; n < q.size(); ++n) {  // deterministic, unit-scale inputs
    q[n] = std::sin(0.37f * n);
    k[n] = std::cos(0.21f * n);
    v[n] = std::sin(0.11f * n + 1.0f);
  }

  maskattn::Options opt;
  opt.causal = true;                          // bottom-right aligned (= top-left when Lq == Lk)
  std::vector<int32_t> key_lengths = {5, 3};  // batch 1 has two padding keys at the end
  opt.key_lengths = key_lengths;

  maskattn::attention(maskattn::bhld(q.data(), B, H, L, D), maskattn::bhld(k.data(), B, H, L, D),
                      maskattn::bhld(v.data(), B, H, L, D), maskattn::bhld(out.data(), B, H, L, D),
                      opt);

  const auto ref = maskattn::reference_attention(maskattn::bhld(q.data(), B, H, L, D),
                                                 maskattn::bhld(k.data(), B, H, L, D),
                                                 maskattn::bhld(v.data(), B, H, L, D), opt);
  // Not std::fmax: a NaN output must fail the check, not be skipped (and aarch64 g++ 12.2 -O3
  // crashes vectorising an fmax reduction over floats widened to double).
  double max_err = 0;
  for (size_t n = 0; n < out.size(); ++n) {
    const double err = std::fabs(double(out[n]) - ref.out[n]);
    if (err > max_err || std::isnan(err)) max_err = err;
  }

  std::printf("maskattn %s, target %s (%d lanes)\n", maskattn::version(),
              maskattn::target_name(maskattn::best_target()), maskattn::target_lanes(maskattn::best_target()));
  for (int b = 0; b < B; ++b) {
    std::printf("batch %d, head 0 (key length %d):\n", b, key_lengths[b]);
    for (int i = 0; i < L; ++i) {
      std::printf("  row %d:", i);
      for (int d = 0; d < D; ++d) std::printf(" %+.6f", out[((b * H + 0) * L + i) * D + d]);
      std::printf("\n");
    }
  }
  std::printf("max |kernel - fp64 reference| = %.3g\n", max_err);
  // Tests pass --expect-target NAME so that a build which silently fell back to another kernel fails.
  if (argc == 3 && std::strcmp(argv[1], "--expect-target") == 0 &&
      std::strcmp(argv[2], maskattn::target_name(maskattn::best_target())) != 0) {
    std::printf("expected target %s\n", argv[2]);
    return 1;
  }
  return max_err < 1e-5 ? 0 : 1;
}
