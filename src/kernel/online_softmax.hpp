// The online-softmax state of one query row, shared by the prefill and the decode kernels:
//   m = running max of the logits, l = sum_j e^(s_j - m), o = sum_j e^(s_j - m) v_j (unnormalised).
// A tile of new logits with max t updates them as  m' = max(m, t),  alpha = e^(m - m'),
//   l' = l * alpha + sum e^(s - m'),  o' = o * alpha + P·V;
// two partial states over disjoint key ranges (split-K) merge the same way, each rescaled by
// e^(m_i - M). The final row is o / l and lse = m + ln l.
//
// The -inf guard: while m is -inf every key seen so far was masked, and e^(s - m) would be
// -inf - (-inf) = NaN, so such a tile contributes nothing (unless a NaN logit hid from the max:
// NaN in attended data must reach the row). Whether a row is fully masked comes from the masks
// (has_key), never from these numbers.
// Semantics: docs/semantics.md, "Fully masked rows" and "Numbers".
#pragma once

#include "base/arch_namespace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "problem/problem.hpp"
#include "kernel/simd.hpp"
#include "kernel/quant.hpp"
#include "kernel/softmax_row.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

constexpr float kLog2e = 1.4426950408889634f;

template <class Arch>
struct OnlineSoftmax {
  using S = Simd<Arch>;
  using V = typename S::V;
  static constexpr int W = S::W;

  // Folds one tile of logits srow[0, kt) (kt a multiple of W; masked entries -inf) whose max is
  // `tile_max` into the row state; leaves the weights p = e^(s - m) in srow and rescales the
  // unnormalised output o[0, o_len) (o_len a multiple of W). Returns false when the tile holds
  // only masked keys (srow is then all 0 and o untouched).
  static bool update(SoftmaxRow& st, float* srow, int kt, float tile_max, float* o, int64_t o_len) {
    const float m_old = st.m;
    float m_new = (m_old != m_old || tile_max < m_old) ? m_old : tile_max;
    if (m_new == kNegInf) {
      // The max saw only -inf, but a NaN logit loses every comparison too: if there is one, the
      // row's result is NaN. Rare path, so a plain scan.
      bool nan = false;
      for (int c = 0; c < kt; ++c) nan = nan || srow[c] != srow[c];
      if (!nan) {
        std::fill(srow, srow + kt, 0.0f);
        return false;
      }
      m_new = std::numeric_limits<float>::quiet_NaN();
    }
    const V m = S::splat(m_new), log2e = S::splat(kLog2e);
    V sum = S::splat(0.0f);
    for (int c = 0; c < kt; c += W) {
      // (x - m) * log2(e) rather than x*log2(e) - m*log2(e): no overflow for |x| near FLT_MAX.
      const V p = S::exp2((S::load(srow + c) - m) * log2e);
      S::store(srow + c, p);
      sum = sum + p;
    }
    const float alpha = m_old == kNegInf ? 0.0f : Simd<ScalarArch>::exp2((m_old - m_new) * kLog2e);
    st.l = st.l * alpha + S::hsum(sum);
    st.m = m_new;
    if (alpha != 1.0f) scale(o, o_len, alpha);
    return true;
  }

  // Adds a partial state over other keys (its output o_part) into `acc` (output o_acc), both
  // unnormalised: each side rescaled by e^(m_i - M). A part that saw no allowed key adds nothing.
  static void merge(SoftmaxRow& acc, float* o_acc, const SoftmaxRow& part, const float* o_part,
                    int64_t o_len) {
    acc.has_key = acc.has_key || part.has_key;
    if (part.m == kNegInf) return;  // nothing allowed (or nothing seen) in that part
    if (acc.m == kNegInf) {
      acc.m = part.m;
      acc.l = part.l;
      std::copy(o_part, o_part + o_len, o_acc);
      return;
    }
    const bool nan = acc.m != acc.m || part.m != part.m;
    const float m = nan ? std::numeric_limits<float>::quiet_NaN() : std::max(acc.m, part.m);
    const float a = Simd<ScalarArch>::exp2((acc.m - m) * kLog2e);
    const float b = Simd<ScalarArch>::exp2((part.m - m) * kLog2e);
    acc.m = m;
    acc.l = acc.l * a + part.l * b;
    const V va = S::splat(a), vb = S::splat(b);
    int64_t c = 0;
    for (; c + W <= o_len; c += W) S::store(o_acc + c, S::load(o_acc + c) * va + S::load(o_part + c) * vb);
    for (; c < o_len; ++c) o_acc[c] = o_acc[c] * a + o_part[c] * b;
  }

  static void scale(float* o, int64_t n, float alpha) {
    const V a = S::splat(alpha);
    int64_t c = 0;
    for (; c + W <= n; c += W) S::store(o + c, S::load(o + c) * a);
    for (; c < n; ++c) o[c] *= alpha;
  }
};

// Keys [0, lead) and [first, end) the `uniform` policy averages over: all Lk, or (KV cache) the
// positions sequence b holds (lead: sink tokens a ring kept below its oldest window position).
struct KeyRange {
  int64_t lead = 0, first = 0, end = 0;
  int64_t size() const { return lead + end - first; }
};
inline KeyRange uniform_keys(const Problem& p, int64_t b) {
  if (!p.kv.is_cache()) return {0, 0, p.Lk};
  const int64_t first = p.kv.first ? int64_t(p.kv.first[b]) : 0;
  return {std::min(p.kv.sink_tokens, first), first, p.key_length(b)};
}

// Mean of V over those keys of (b, kv head): the `uniform` policy's output row (any V dtype).
inline void mean_of_values(const Problem& p, int64_t b, int64_t hkv, float* mean) {
  std::fill(mean, mean + p.Dv, 0.0f);
  const KeyRange keys = uniform_keys(p, b);
  if (keys.size() <= 0) return;
  for (int64_t c = 0; c < p.Dv; ++c) {  // column by column: no allocation mid-output
    double sum = 0;
    for (int64_t j = 0; j < keys.lead; ++j) sum += stored_element(p.kv.v_type, p.kv.value_row(b, hkv, j), p.Dv, c);
    for (int64_t j = keys.first; j < keys.end; ++j) sum += stored_element(p.kv.v_type, p.kv.value_row(b, hkv, j), p.Dv, c);
    mean[c] = float(sum / double(keys.size()));
  }
}

// The final scale of a row that attended some key: out = o * o_mul, lse = m + ln l, weights
// e^(s - m) / l. A sink adds e^(sink - m) to the denominator, as one more key with value 0 (the
// max moves to the sink when it is larger, rescaling o). A NaN row stays NaN.
struct RowScale {
  float m, l, o_mul;
};
inline RowScale row_scale(const Problem& p, int64_t h, const SoftmaxRow& st) {
  const float sink = p.sinks ? p.sinks[h] : kNegInf;
  float m = st.m, l = st.l, o_scale = 1.0f;
  if (sink != kNegInf && m == m) {
    if (sink > m) {
      o_scale = Simd<ScalarArch>::exp2((m - sink) * kLog2e);
      l = l * o_scale + 1.0f;
      m = sink;
    } else {
      l += Simd<ScalarArch>::exp2((sink - m) * kLog2e);
    }
  }
  return {m, l, o_scale / l};
}

// Turns a weights row of logits (-inf where masked) into probabilities e^(s - m) / l. Masked pairs
// (logit -inf) are exactly 0, also in a row whose max is NaN.
template <class Arch>
void finish_weights_row(float* w, int64_t n, float m, float l) {
  using S = Simd<Arch>;
  using V = typename S::V;
  constexpr int W = S::W;
  const float inv_l = 1.0f / l;
  const V mv = S::splat(m), log2e = S::splat(kLog2e), scale = S::splat(inv_l), ninf = S::splat(kNegInf);
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const V x = S::load(w + j);
    S::store(w + j, S::select(x == ninf, S::splat(0.0f), S::exp2((x - mv) * log2e) * scale));
  }
  for (; j < n; ++j) w[j] = w[j] == kNegInf ? 0.0f : Simd<ScalarArch>::exp2((w[j] - m) * kLog2e) * inv_l;
}

// Writes the final result of query row i of (b, h) when it attended nothing: the output row, its
// lse, and (if asked) its weights row, as the sink or the fully-masked policy decides. `mean_v` is
// called only under the `uniform` policy.
template <class MeanV>
void write_unattended_row(const Problem& p, int64_t b, int64_t h, int64_t i, float* w, MeanV&& mean_v) {
  float* out = p.out + b * p.os.b + h * p.os.h + i * p.os.l;
  float* lse = p.lse ? p.lse + (b * p.Hq + h) * p.Lq + i : nullptr;
  const float sink = p.sinks ? p.sinks[h] : kNegInf;
  if (sink != kNegInf) {  // only the sink: it takes all the weight, whatever the policy
    if (lse) *lse = sink;
    std::fill(out, out + p.Dv, 0.0f);
    if (w) std::fill(w, w + p.Lk, 0.0f);
    return;
  }
  if (lse) *lse = kNegInf;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  switch (p.policy) {
    case FullyMasked::zero:
      std::fill(out, out + p.Dv, 0.0f);
      if (w) std::fill(w, w + p.Lk, 0.0f);
      break;
    case FullyMasked::nan:
      std::fill(out, out + p.Dv, nan);
      if (w) std::fill(w, w + p.Lk, nan);
      break;
    case FullyMasked::uniform: {
      const float* mean = mean_v();
      std::copy(mean, mean + p.Dv, out);
      if (w) {
        const KeyRange keys = uniform_keys(p, b);
        std::fill(w, w + p.Lk, 0.0f);
        if (keys.size() > 0) {
          std::fill(w, w + keys.lead, 1.0f / float(keys.size()));
          std::fill(w + keys.first, w + keys.end, 1.0f / float(keys.size()));
        }
      }
      break;
    }
  }
}

// Writes the final result of query row i of (b, h): the output row, its lse, and (if asked) turns
// the weights row, which holds the row's logits (-inf where masked), into probabilities.
// `mean_v` is called only for a fully masked row under the `uniform` policy.
template <class Arch, class MeanV>
void write_row_result(const Problem& p, int64_t b, int64_t h, int64_t i, const SoftmaxRow& st,
                      const float* o, float* w, MeanV&& mean_v) {
  if (!st.has_key) return write_unattended_row(p, b, h, i, w, mean_v);
  const RowScale rs = row_scale(p, h, st);
  float* out = p.out + b * p.os.b + h * p.os.h + i * p.os.l;
  for (int64_t c = 0; c < p.Dv; ++c) out[c] = o[c] * rs.o_mul;
  if (p.lse) p.lse[(b * p.Hq + h) * p.Lq + i] = rs.m + std::log(rs.l);
  if (w) finish_weights_row<Arch>(w, p.Lk, rs.m, rs.l);
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
