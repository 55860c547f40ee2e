// Peer (a): attention on top of OpenBLAS, written the way a performance-minded user writes it.
// Per batch and kv head: the group's query rows (Hq/Hkv heads x Lq rows, contiguous in bhld) as one
// GEMM against the shared K (sgemv when that is one row), S = scale·Q·Kᵀ over the valid keys only
// (key lengths shorten the GEMM); a vectorised softmax with a polynomial exp that applies the causal
// diagonal, key lengths and the boolean mask in the same pass; then O = P·V (sgemm or sgemv).
// It materialises the score rows and does the full GEMM work whatever the causal mask skips.
// Threads: OpenBLAS's own (openblas_set_num_threads).
#include <cblas.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "problem.hpp"
#include "softmax.hpp"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_config(void);

namespace peers {
namespace {

class BlasPeer final : public Peer {
 public:
  explicit BlasPeer(const Problem& p) : p_(p) {
    scores_.resize(size_t(p.group()) * p.Lq * p.Lk);
  }
  std::string name() const override { return "openblas"; }
  std::string detail() const override { return openblas_get_config(); }

  void run(int threads, const float* q, const float* k, const float* v, float* o) override {
    if (threads != threads_) {
      openblas_set_num_threads(threads);
      threads_ = threads;
    }
    const Problem& p = p_;
    const int G = p.group(), M = G * p.Lq, D = p.D;
    const float scale = 1.0f / std::sqrt(float(D));
    float* S = scores_.data();
    for (int b = 0; b < p.B; ++b) {
      const int n = p.key_length(b);
      for (int hk = 0; hk < p.Hkv; ++hk) {
        const size_t qoff = (size_t(b) * p.Hq + size_t(hk) * G) * p.Lq * D;
        const float* qg = q + qoff;
        float* og = o + qoff;
        const float* kh = k + (size_t(b) * p.Hkv + hk) * p.Lk * D;
        const float* vh = v + (size_t(b) * p.Hkv + hk) * p.Lk * D;
        if (n <= 0) {
          std::memset(og, 0, sizeof(float) * size_t(M) * D);
          continue;
        }
        if (M == 1)
          cblas_sgemv(CblasRowMajor, CblasNoTrans, n, D, scale, kh, D, qg, 1, 0.0f, S, 1);
        else
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, n, D, scale, qg, D, kh, D, 0.0f, S, n);
        for (int r = 0; r < M; ++r) {
          const int h = hk * G + r / p.Lq, i = r % p.Lq;
          const uint8_t* keep =
              p.allowed.empty() ? nullptr : p.allowed.data() + ((size_t(b) * p.Hq + h) * p.Lq + i) * p.Lk;
          softmax_row(S + size_t(r) * n, n, p.row_end(b, i), keep);
        }
        if (M == 1)
          cblas_sgemv(CblasRowMajor, CblasTrans, n, D, 1.0f, vh, D, S, 1, 0.0f, og, 1);
        else
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, D, n, 1.0f, S, n, vh, D, 0.0f, og, D);
      }
    }
  }

 private:
  Problem p_;
  std::vector<float> scores_;
  int threads_ = -1;
};

}  // namespace

std::unique_ptr<Peer> make_openblas_peer(const Problem& p, std::string*) { return std::make_unique<BlasPeer>(p); }

}  // namespace peers
