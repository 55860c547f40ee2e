// The peer: attention the way one writes it on top of a BLAS (OpenBLAS here), as a user would
// without a fused kernel: S = Q·Kᵀ·scale (sgemm), causal mask as -inf, row softmax, O = P·V (sgemm).
// It materialises the Lq x Lk score matrix and does the full work whatever the mask.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace peers {

inline void blas_attention(const float* q, const float* k, const float* v, float* o, int B, int H,
                           int Lq, int Lk, int D, bool causal, std::vector<float>& scores) {
  const float scale = 1.0f / std::sqrt(float(D));
  scores.resize(size_t(Lq) * Lk);
  for (int bh = 0; bh < B * H; ++bh) {
    const float* qh = q + size_t(bh) * Lq * D;
    const float* kh = k + size_t(bh) * Lk * D;
    const float* vh = v + size_t(bh) * Lk * D;
    float* oh = o + size_t(bh) * Lq * D;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lq, Lk, D, scale, qh, D, kh, D, 0.0f,
                scores.data(), Lk);
    for (int i = 0; i < Lq; ++i) {
      float* row = scores.data() + size_t(i) * Lk;
      const int allowed = causal ? std::min(Lk, i + (Lk - Lq) + 1) : Lk;  // bottom-right
      std::fill(row + std::max(allowed, 0), row + Lk, -std::numeric_limits<float>::infinity());
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < Lk; ++j) m = std::max(m, row[j]);
      float sum = 0;
      for (int j = 0; j < Lk; ++j) sum += (row[j] = std::exp(row[j] - m));
      const float inv = 1.0f / sum;
      for (int j = 0; j < Lk; ++j) row[j] *= inv;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lq, D, Lk, 1.0f, scores.data(), Lk, vh,
                D, 0.0f, oh, D);
  }
}

}  // namespace peers
