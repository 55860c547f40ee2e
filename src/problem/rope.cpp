// The inner loop of every RoPE rotation (attention()'s copies of Q and K, a cache's appends and
// queries), out of line so that it can be compiled twice on x86-64.
#include "problem/rope.hpp"

#include "base/compiler.hpp"

namespace maskattn::detail {
namespace {

// Inlined into both copies of rope_rotate_pairs (else both would call the baseline's loop).
template <bool kScaled>
MASKATTN_ALWAYS_INLINE inline void rotate_pairs(RopeLayout layout, const float* in, float* out, const double* c, const double* s, int64_t half,
                  double a) {
  if (layout == RopeLayout::interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      const double x = in[2 * i], y = in[2 * i + 1];
      const double rx = x * c[i] - y * s[i], ry = x * s[i] + y * c[i];
      out[2 * i] = float(kScaled ? rx * a : rx);
      out[2 * i + 1] = float(kScaled ? ry * a : ry);
    }
  } else {  // halves: two contiguous runs, which the compiler vectorizes
    const float* xs = in;
    const float* ys = in + half;
    float* ox = out;
    float* oy = out + half;
    for (int64_t i = 0; i < half; ++i) {
      const double x = xs[i], y = ys[i];
      const double rx = x * c[i] - y * s[i], ry = x * s[i] + y * c[i];
      ox[i] = float(kScaled ? rx * a : rx);
      oy[i] = float(kScaled ? ry * a : ry);
    }
  }
}

}  // namespace

MASKATTN_CLONES_AVX2
void rope_rotate_pairs(RopeLayout layout, const float* in, float* out, const double* c, const double* s, int64_t half,
                       double scale) {
  // x 1.0 is exact, so an unscaled Rope skips the multiply and rounds as it would with it.
  if (scale != 1.0) rotate_pairs<true>(layout, in, out, c, s, half, scale);
  else rotate_pairs<false>(layout, in, out, c, s, half, scale);
}

}  // namespace maskattn::detail
