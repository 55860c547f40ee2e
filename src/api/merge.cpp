// merge_attention: partial results over disjoint key sets combined through their log-sum-exp, with
// the online-softmax merge split-K uses inside a call (kernel/online_softmax.hpp), in scalar code:
// the work is one pass over the outputs, bound by memory.
// Semantics: docs/semantics.md, "Merging partial results".
#include <cmath>
#include <limits>
#include <vector>

#include "problem/problem.hpp"
#include "kernel/online_softmax.hpp"
#include "maskattn/maskattn.hpp"

namespace maskattn {

void merge_attention(Span<AttentionPart> parts, const MutableTensor& out, float* out_lse) {
  // No rows: nothing to write (and no 2^45 empty (b, h) pairs to visit).
  if (!detail::check_merge(parts, out)) return;
  const int64_t* shape = parts[0].output.shape;
  const int64_t B = shape[0], H = shape[1], L = shape[2], Dv = shape[3];
  using Merge = detail::OnlineSoftmax<detail::ScalarArch>;
  std::vector<float> o(static_cast<size_t>(Dv));
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const int64_t row = (b * H + h) * L + i;
        detail::SoftmaxRow acc;
        std::fill(o.begin(), o.end(), 0.0f);
        for (size_t p = 0; p < parts.size; ++p) {
          const ConstTensor& t = parts[p].output;
          const float* part_row = t.data + b * t.strides[0] + h * t.strides[1] + i * t.strides[2];
          // A part's result is normalised: its state is (m = lse, l = 1).
          detail::SoftmaxRow st;
          st.m = parts[p].lse[row];
          st.l = 1.0f;
          st.has_key = !(st.m == ninf);
          Merge::merge(acc, o.data(), st, part_row, Dv);
        }
        float* dst = out.data + b * out.strides[0] + h * out.strides[1] + i * out.strides[2];
        if (acc.m == ninf) {  // no part attended anything for this row
          std::fill(dst, dst + Dv, 0.0f);
          if (out_lse) out_lse[row] = ninf;
          continue;
        }
        if (acc.m != acc.m) {  // a NaN lse: the row is NaN, whatever the outputs held
          std::fill(dst, dst + Dv, std::numeric_limits<float>::quiet_NaN());
          if (out_lse) out_lse[row] = acc.m;
          continue;
        }
        const float inv = 1.0f / acc.l;
        for (int64_t c = 0; c < Dv; ++c) dst[c] = o[size_t(c)] * inv;
        if (out_lse) out_lse[row] = acc.m + std::log(acc.l);
      }
}

}  // namespace maskattn
