// The inner loop of every RoPE rotation (attention()'s copies of Q and K, a cache's appends and
// queries), out of line so that it can be compiled twice on x86-64.
#include "problem/rope.hpp"

#include "base/compiler.hpp"

namespace maskattn::detail {
namespace {

// Inlined into both copies (else the AVX2 one would call the baseline's loops).
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

// x 1.0 is exact, so an unscaled Rope skips the multiply and rounds as it would with it.
MASKATTN_ALWAYS_INLINE inline void rotate_row(RopeLayout layout, const float* in, float* out, const double* c,
                                              const double* s, int64_t half, double scale) {
  if (scale != 1.0) rotate_pairs<true>(layout, in, out, c, s, half, scale);
  else rotate_pairs<false>(layout, in, out, c, s, half, scale);
}

#if MASKATTN_X86_AVX2_COPY
// The same loops with 4 doubles per instruction (measured alone: a bfloat16 cache's single-token
// append with rope 1.32x -> 1.28x the append without it, 512 tokens 1.17x -> 1.14x; AVX2, Zen 3).
MASKATTN_TARGET_AVX2 void rotate_avx2(RopeLayout layout, const float* in, float* out, const double* c, const double* s,
                                      int64_t half, double scale) {
  rotate_row(layout, in, out, c, s, half, scale);
}
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

void rope_rotate_pairs(RopeLayout layout, const float* in, float* out, const double* c, const double* s, int64_t half,
                       double scale) {
#if MASKATTN_X86_AVX2_COPY
  if (has_avx2()) return rotate_avx2(layout, in, out, c, s, half, scale);
#endif
  rotate_row(layout, in, out, c, s, half, scale);
}

}  // namespace maskattn::detail
