// Peer (b): attention in Eigen, written the plain way: per batch and query head, Map the row-major
// Q, K, V, O blocks, S = Q·Kᵀ·scale (noalias product over the valid keys), masked entries set to
// -inf, a row softmax with Eigen's array exp, O = P·V. Threads: Eigen's own (OpenMP, used by its
// matrix-matrix products; matrix-vector products run on one thread).
#include <Eigen/Core>

#include <cmath>
#include <limits>

#include "problem.hpp"

namespace peers {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MaskMatrix = Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class EigenPeer final : public Peer {
 public:
  explicit EigenPeer(const Problem& p) : p_(p) {}
  std::string name() const override { return "eigen"; }
  std::string detail() const override {
    return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
           std::to_string(EIGEN_MINOR_VERSION) + ", SIMD: " + Eigen::SimdInstructionSetsInUse();
  }

  void run(int threads, const float* q, const float* k, const float* v, float* o) override {
    Eigen::setNbThreads(threads);
    const Problem& p = p_;
    const int D = p.D, Lq = p.Lq;
    const float scale = 1.0f / std::sqrt(float(D));
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int b = 0; b < p.B; ++b) {
      const int n = p.key_length(b);
      for (int h = 0; h < p.Hq; ++h) {
        const int hk = h / p.group();
        Eigen::Map<const RowMatrix> Q(q + (size_t(b) * p.Hq + h) * Lq * D, Lq, D);
        Eigen::Map<const RowMatrix> K(k + (size_t(b) * p.Hkv + hk) * p.Lk * D, n, D);
        Eigen::Map<const RowMatrix> V(v + (size_t(b) * p.Hkv + hk) * p.Lk * D, n, D);
        Eigen::Map<RowMatrix> O(o + (size_t(b) * p.Hq + h) * Lq * D, Lq, D);
        S_.resize(Lq, n);
        S_.noalias() = Q * K.transpose();
        S_ *= scale;
        if (p.causal)
          for (int i = 0; i < Lq; ++i) {
            const int end = p.row_end(b, i);
            S_.row(i).tail(n - end).setConstant(ninf);
          }
        if (!p.allowed.empty()) {
          Eigen::Map<const MaskMatrix, 0, Eigen::OuterStride<>> keep(
              p.allowed.data() + (size_t(b) * p.Hq + h) * Lq * p.Lk, Lq, n, Eigen::OuterStride<>(p.Lk));
          S_ = (keep.array() != 0).select(S_, ninf);
        }
        row_max_ = S_.rowwise().maxCoeff();
        S_ = (S_.colwise() - row_max_).array().exp();
        row_sum_ = S_.rowwise().sum();
        S_.array().colwise() /= row_sum_.array();
        O.noalias() = S_ * V;
      }
    }
  }

 private:
  Problem p_;
  RowMatrix S_;
  Eigen::VectorXf row_max_, row_sum_;
};

}  // namespace

std::unique_ptr<Peer> make_eigen_peer(const Problem& p, std::string*) { return std::make_unique<EigenPeer>(p); }

}  // namespace peers
