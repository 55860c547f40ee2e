// Peer (c): attention from oneDNN primitives: a batched matmul S = scale·Q·Kᵀ + mask (4-D,
// [B, Hkv, (Hq/Hkv)·Lq, Lk]: a kv head's query heads are contiguous rows in bhld, so GQA needs no
// copy; Kᵀ is a strided view of K), an in-place softmax primitive over the keys, and a batched
// matmul O = P·V. Masks (causal, key lengths, boolean) are one additive 0 / -inf tensor, given to
// the first matmul as a binary-add post-op, built once when the case is set up (as a user would
// when preparing the inputs): with broadcast dimensions when oneDNN's fast matmul accepts them,
// else full-size (its bias input and broadcast post-ops fall back to the slow reference matmul). Key lengths cannot shorten a batched matmul: it runs over
// the full Lk capacity. Threads: OpenMP (oneDNN's runtime here); the primitives are created once per
// thread count, with omp_set_num_threads set, and run with the same setting.
#include <omp.h>

#include <cmath>
#include <limits>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>

#include "problem.hpp"

namespace peers {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

class DnnlPeer final : public Peer {
 public:
  DnnlPeer(const Problem& p, const std::vector<int>& thread_counts) : p_(p), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    const memory::dim B = p.B, H = p.Hkv, M = memory::dim(p.group()) * p.Lq, N = p.Lk, D = p.D;
    const bool needB = !p.key_lengths.empty() || !p.allowed.empty();
    const bool needH = !p.allowed.empty();
    const bool needM = p.causal || !p.allowed.empty();
    const bool any_mask = needB || needH || needM;
    q_md_ = memory::desc({B, H, M, D}, dt::f32, tag::abcd);
    kt_md_ = memory::desc({B, H, D, N}, dt::f32, memory::dims{H * N * D, N * D, 1, D});  // Kᵀ view of K
    s_md_ = memory::desc({B, H, M, N}, dt::f32, tag::abcd);
    v_md_ = memory::desc({B, H, N, D}, dt::f32, tag::abcd);
    o_md_ = memory::desc({B, H, M, D}, dt::f32, tag::abcd);
    if (any_mask) {
      // Broadcast dims first; oneDNN's fast matmul may only take a full-size mask as a post-op.
      mask_dims_ = {needB ? B : 1, needH ? H : 1, needM ? M : 1, N};
      full_dims_ = {B, H, M, N};
    }
    scores_ = memory(s_md_, eng_);
    const int saved = omp_get_max_threads();
    for (int t : thread_counts) {
      omp_set_num_threads(t);
      Prims& pr = prims_[t];
      const float scale = 1.0f / std::sqrt(float(p.D));
      dnnl::matmul::primitive_desc qk_pd;
      if (any_mask) {
        // The mask as a binary-add post-op: broadcast shape when the fast (brgemm) matmul takes it,
        // else the full [B, Hkv, M, Lk] tensor (what it supports in oneDNN 2.6).
        for (const memory::dims& dims : {mask_dims_, full_dims_}) {
          dnnl::post_ops ops;
          ops.append_binary(dnnl::algorithm::binary_add, memory::desc(dims, dt::f32, tag::abcd));
          dnnl::primitive_attr attr;
          attr.set_output_scales(0, {scale});
          attr.set_post_ops(ops);
          qk_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md_, kt_md_, s_md_), attr, eng_);
          if (mask_md_.dims() != dims) build_mask(dims);
          if (std::string(qk_pd.impl_info_str()).rfind("ref", 0) != 0) break;
        }
      } else {
        dnnl::primitive_attr attr;
        attr.set_output_scales(0, {scale});
        qk_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md_, kt_md_, s_md_), attr, eng_);
      }
      dnnl::softmax_forward::primitive_desc sm_pd(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md_, 3), eng_);
      dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(s_md_, v_md_, o_md_), eng_);
      pr.qk = dnnl::matmul(qk_pd);
      pr.softmax = dnnl::softmax_forward(sm_pd);
      pr.pv = dnnl::matmul(pv_pd);
      if (detail_.empty()) {
        detail_ = std::string("impl: ") + qk_pd.impl_info_str() + " / " + sm_pd.impl_info_str() + " / " + pv_pd.impl_info_str();
        if (any_mask) {
          const memory::dims d = mask_md_.dims();
          detail_ += ", mask [" + std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]) + "," +
                     std::to_string(d[3]) + "]";
        }
      }
    }
    omp_set_num_threads(saved);
    const dnnl_version_t* ver = dnnl_version();
    detail_ = "oneDNN " + std::to_string(ver->major) + "." + std::to_string(ver->minor) + "." +
              std::to_string(ver->patch) + ", " + detail_;
    q_mem_ = memory(q_md_, eng_, nullptr);
    k_mem_ = memory(kt_md_, eng_, nullptr);
    v_mem_ = memory(v_md_, eng_, nullptr);
    o_mem_ = memory(o_md_, eng_, nullptr);
  }

  std::string name() const override { return "onednn"; }

  // The additive mask (0 = attend, -inf = masked) for dims [mb, mh, mm, Lk] of the score tensor.
  void build_mask(const memory::dims& dims) {
    const Problem& p = p_;
    const memory::dim mb = dims[0], mh = dims[1], mm = dims[2], N = dims[3];
    const float ninf = -std::numeric_limits<float>::infinity();
    mask_md_ = memory::desc(dims, dt::f32, tag::abcd);
    mask_.assign(size_t(mb * mh * mm * N), 0.0f);
    for (memory::dim b = 0; b < mb; ++b)
      for (memory::dim h = 0; h < mh; ++h)
        for (memory::dim r = 0; r < mm; ++r) {
          const int i = int(r % p.Lq);
          float* row = mask_.data() + ((b * mh + h) * mm + r) * N;
          for (int j = p.row_end(int(b), i); j < p.Lk; ++j) row[j] = ninf;  // b = 0 when not per batch: no lengths
          if (!p.allowed.empty()) {
            const int hq = int(h) * p.group() + int(r / p.Lq);
            const uint8_t* keep = p.allowed.data() + ((size_t(b) * p.Hq + hq) * p.Lq + i) * p.Lk;
            for (int j = 0; j < p.Lk; ++j)
              if (!keep[j]) row[j] = ninf;
          }
        }
    mask_mem_ = memory(mask_md_, eng_, mask_.data());
  }
  std::string detail() const override { return detail_; }

  void run(int threads, const float* q, const float* k, const float* v, float* o) override {
    auto it = prims_.find(threads);
    if (it == prims_.end()) throw std::runtime_error("onednn peer: no primitives for this thread count");
    omp_set_num_threads(threads);
    q_mem_.set_data_handle(const_cast<float*>(q));
    k_mem_.set_data_handle(const_cast<float*>(k));
    v_mem_.set_data_handle(const_cast<float*>(v));
    o_mem_.set_data_handle(o);
    std::unordered_map<int, memory> qk_args = {{DNNL_ARG_SRC, q_mem_}, {DNNL_ARG_WEIGHTS, k_mem_}, {DNNL_ARG_DST, scores_}};
    if (mask_mem_) qk_args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = mask_mem_;
    it->second.qk.execute(strm_, qk_args);
    it->second.softmax.execute(strm_, {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_DST, scores_}});
    it->second.pv.execute(strm_, {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_WEIGHTS, v_mem_}, {DNNL_ARG_DST, o_mem_}});
    strm_.wait();
  }

 private:
  struct Prims {
    dnnl::matmul qk, pv;
    dnnl::softmax_forward softmax;
  };
  Problem p_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  memory::desc q_md_, kt_md_, s_md_, v_md_, o_md_, mask_md_;
  memory::dims mask_dims_, full_dims_;
  std::vector<float> mask_;
  memory mask_mem_, scores_, q_mem_, k_mem_, v_mem_, o_mem_;
  std::map<int, Prims> prims_;
  std::string detail_;
};

}  // namespace

std::unique_ptr<Peer> make_dnnl_peer(const Problem& p, const std::vector<int>& thread_counts, std::string* why) {
  try {
    return std::make_unique<DnnlPeer>(p, thread_counts);
  } catch (const dnnl::error& e) {
    if (why) *why = std::string("oneDNN rejected the case: ") + e.what();
    return nullptr;
  }
}

}  // namespace peers
