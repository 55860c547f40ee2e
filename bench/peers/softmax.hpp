// A vectorised row softmax for the BLAS peer, with the masks applied in the same pass.
//
// exp(x) = 2^n * exp(r): n = round(x / ln 2), r = x - n ln 2 split in two constants (so r is exact to
// a few ulps), |r| <= ln(2)/2, and exp(r) by its Taylor polynomial to degree 6 (truncation error
// below 1.3e-7 relative at |r| = 0.347). 2^n is built in the exponent bits. Inputs are x = s - max
// <= 0; below -87 (where 2^n would leave the normal range) the result is 0.
//
// Every loop is branch-free over plain arrays, so g++ -O3 with -march=<anything with SIMD> and
// -fopenmp-simd vectorises it (checked with -fopt-info-vec).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace peers {

inline float exp_poly(float x) {
  const float log2e = 1.44269504088896341f;
  const float ln2_hi = 0.693145751953125f;       // ln 2 rounded to 16 significant bits: n * ln2_hi is exact
  const float ln2_lo = 1.428606765330187045e-06f;  // ln 2 - ln2_hi
  const float xc = x < -87.0f ? -87.0f : x;
  const float n = std::floor(xc * log2e + 0.5f);
  const float r = (xc - n * ln2_hi) - n * ln2_lo;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < -87.0f ? 0.0f : p * two_n;
}

// row[0, n): scaled scores in, probabilities out. Keys j >= end are masked (causal / key length);
// keep (may be null) is the boolean mask of the row. A row with no allowed key becomes zeros
// (maskattn's default policy).
inline void softmax_row(float* row, int n, int end, const uint8_t* keep) {
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf;
  if (keep) {
#pragma omp simd reduction(max : m)
    for (int j = 0; j < end; ++j) {
      const float s = keep[j] ? row[j] : ninf;
      m = s > m ? s : m;
    }
  } else {
#pragma omp simd reduction(max : m)
    for (int j = 0; j < end; ++j) m = row[j] > m ? row[j] : m;
  }
  if (m == ninf) {
    std::memset(row, 0, sizeof(float) * size_t(n));
    return;
  }
  float sum = 0;
  if (keep) {
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < end; ++j) {
      const float e = keep[j] ? exp_poly(row[j] - m) : 0.0f;
      row[j] = e;
      sum += e;
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < end; ++j) {
      const float e = exp_poly(row[j] - m);
      row[j] = e;
      sum += e;
    }
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < end; ++j) row[j] *= inv;
  if (end < n) std::memset(row + end, 0, sizeof(float) * size_t(n - end));
}

}  // namespace peers
