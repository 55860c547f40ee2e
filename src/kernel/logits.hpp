// Logits and masks of one query row over one key tile, shared by the prefill and decode kernels:
// which pairs the element-wise rules (segments, `allowed`, `bias`) allow, how a (row, tile) pair
// classifies (skip / full / mixed), and the pass that turns raw dot products into natural-unit
// logits (scale, softcap, ALiBi, bias; -inf where masked) and returns the row maximum.
// Semantics: docs/semantics.md, "Which keys a query may attend" and "Bias values that are not ordinary numbers".
#pragma once

#include "base/arch_namespace.hpp"

#include <algorithm>
#include <cstdint>

#include "problem/problem.hpp"
#include "kernel/simd.hpp"
#include "problem/row_keys.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

//   skip  - every pair masked: nothing computed, K/V not touched;
//   full  - every pair allowed: no per-element mask work;
//   mixed - an interval edge or an element-wise rule cuts it: masks applied per element.
enum class TileClass : uint8_t { skip, full, mixed };

inline TileClass combine(TileClass a, TileClass b) {
  if (a == TileClass::skip || b == TileClass::skip) return TileClass::skip;
  return a == TileClass::full && b == TileClass::full ? TileClass::full : TileClass::mixed;
}

template <class T>
const T* mask_row(const MaskView<T>& m, int64_t b, int64_t h, int64_t i) {
  return m.data + b * m.strides[0] + h * m.strides[1] + i * m.strides[2];
}

template <class Arch>
class Logits {
  using S = Simd<Arch>;
  using V = typename S::V;
  using M = typename S::M;
  static constexpr int W = S::W;

 public:
  explicit Logits(const Problem& p) : p_(p) {}

  // Class of query row i's pairs with keys [j0, j0 + n) (n <= the tile width), from its key
  // intervals and the element-wise rules. seg_lo/seg_hi: the range of key segment ids in the tile.
  TileClass classify_row(int64_t b, int64_t h, int64_t i, const RowKeys& keys, int64_t j0, int64_t n,
                         int32_t seg_lo, int32_t seg_hi) const {
    if (keys.misses(j0, j0 + n)) return TileClass::skip;
    TileClass cls = keys.covers(j0, j0 + n) ? TileClass::full : TileClass::mixed;
    if (p_.query_segments) {
      const int32_t sq = p_.query_segments[b * p_.Lq + i];
      cls = combine(cls, sq < seg_lo || sq > seg_hi ? TileClass::skip
                         : seg_lo == seg_hi          ? TileClass::full
                                                     : TileClass::mixed);
    }
    if (cls == TileClass::full && p_.tree_parents) {  // the tree's keys: only i's ancestors
      const int64_t t0 = p_.tree_start(b);
      if (j0 + n > t0 && j0 < t0 + p_.Lq) cls = TileClass::mixed;
    }
    if (cls != TileClass::skip && p_.allowed) {
      const uint8_t* a = mask_row(p_.allowed, b, h, i) + j0 * p_.allowed.strides[3];
      const int64_t step = p_.allowed.strides[3];
      int64_t on = 0;
      for (int64_t j = 0; j < (step ? n : 1); ++j) on += a[j] != 0;
      cls = combine(cls, on == 0 ? TileClass::skip : on == (step ? n : 1) ? TileClass::full : TileClass::mixed);
    }
    if (cls != TileClass::skip && p_.bias) {
      const float* bi = mask_row(p_.bias, b, h, i) + j0 * p_.bias.strides[3];
      const int64_t step = p_.bias.strides[3];
      int64_t open = 0;
      for (int64_t j = 0; j < (step ? n : 1); ++j) open += bi[j] != kNegInf;
      cls = combine(cls, open == 0 ? TileClass::skip : open == (step ? n : 1) ? TileClass::full : TileClass::mixed);
    }
    return cls;
  }

  // Element-wise rules of row i over keys [j0, j0 + n), gathered once: valid[j] 1/0 and (with a
  // bias) its values, both padded with 0 up to kt. Scalar on purpose: only mixed tiles get here,
  // and the rules' layouts vary (broadcasts, bytes).
  void element_row(int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n, int kt, float* valid,
                   float* bias_out) const {
    std::fill(valid, valid + n, 1.0f);
    std::fill(valid + n, valid + kt, 0.0f);
    if (p_.query_segments) {
      const int32_t sq = p_.query_segments[b * p_.Lq + i];
      const int32_t* sk = p_.key_segments + b * p_.Lk + j0;
      for (int64_t j = 0; j < n; ++j)
        if (sk[j] != sq) valid[j] = 0.0f;
    }
    if (p_.allowed) {
      const uint8_t* a = mask_row(p_.allowed, b, h, i);
      if (p_.allowed.strides[3] == 1) {  // the common layout, as a loop the compiler vectorises
        // __restrict: uint8_t may alias anything, and without it every store to `valid` could
        // change a later byte of the mask, which keeps the loop scalar (measured: 3x slower #6).
        const uint8_t* __restrict bytes = a + j0;
        float* __restrict out = valid;
        // A vector loop of the target's own where the compiler's is poor (kernel/simd/wasm.hpp),
        // then this one.
        int64_t j = clear_where_zero(bytes, out, n);
        for (; j < n; ++j) out[j] = bytes[j] != 0 ? out[j] : 0.0f;
      } else if (!a[0]) {  // broadcast over keys
        std::fill(valid, valid + n, 0.0f);
      }
    }
    if (p_.tree_parents) {  // tree node t (key t0 + t) is visible iff it is an ancestor-or-self of i
      const int64_t t0 = p_.tree_start(b);
      const int32_t* tin = p_.tree_row(p_.tree_in, b);
      const int32_t* tout = p_.tree_row(p_.tree_out, b);
      const int32_t me = tin[i];
      for (int64_t j = std::max(j0, t0); j < std::min(j0 + n, t0 + p_.Lq); ++j)
        if (!(tin[j - t0] <= me && me < tout[j - t0])) valid[j - j0] = 0.0f;
    }
    if (p_.bias) {
      const float* bi = mask_row(p_.bias, b, h, i);
      const int64_t step = p_.bias.strides[3];
      for (int64_t j = 0; j < n; ++j) {
        bias_out[j] = bi[(j0 + j) * step];
        if (bias_out[j] == kNegInf) valid[j] = 0.0f;
      }
      std::fill(bias_out + n, bias_out + kt, 0.0f);
    }
  }

  // Turns raw dot products into natural-unit logits in place (scale, softcap, ALiBi, bias, masks;
  // -inf where masked) and returns the row maximum. Each feature is a branch-free pass chosen
  // once per row; the common case (no ALiBi, no bias) is one fused loop. Out of line: inlined, its
  // variants made key_tile large enough that the micro-tiles around it compiled ~15% slower in wasm.
  MASKATTN_NOINLINE_WASM float row(float* srow, int kt, int64_t j0, int64_t b, int64_t h, int64_t i, const RowKeys& keys,
                   bool masked, const float* valid, const float* bias_tile,
                   const float* bias_row, bool& has_key) const {
    const bool softcap = p_.softcap > 0;
    const bool alibi = p_.alibi_slopes != nullptr;
    const bool bias = bias_tile || bias_row;
    if (!alibi && !bias) {
      if (!masked) return softcap ? mask_max<false, false, true, true>(srow, kt, j0, keys, valid, has_key)
                                  : mask_max<false, false, true, false>(srow, kt, j0, keys, valid, has_key);
      if (valid) return softcap ? mask_max<true, true, true, true>(srow, kt, j0, keys, valid, has_key)
                                : mask_max<true, true, true, false>(srow, kt, j0, keys, valid, has_key);
      return softcap ? mask_max<true, false, true, true>(srow, kt, j0, keys, valid, has_key)
                     : mask_max<true, false, true, false>(srow, kt, j0, keys, valid, has_key);
    }
    if (softcap) scale_row<true>(srow, kt);
    else scale_row<false>(srow, kt);
    if (alibi) alibi_row(srow, kt, -p_.alibi_slopes[h], float(i + p_.diagonal_offset(b) - j0));
    if (bias_tile) add_row(srow, kt, bias_tile);
    else if (bias_row && p_.bias.strides[3]) add_row(srow, kt, bias_row + j0);
    else if (bias_row) add_scalar(srow, kt, bias_row[0]);
    if (!masked) return mask_max<false, false, false, false>(srow, kt, j0, keys, valid, has_key);
    if (valid) return mask_max<true, true, false, false>(srow, kt, j0, keys, valid, has_key);
    return mask_max<true, false, false, false>(srow, kt, j0, keys, valid, has_key);
  }

  // s = scale * dot, or softcap * tanh(dot * scale / softcap).
  template <bool Softcap>
  void scale_row(float* srow, int kt) const {
    const V scale = S::splat(Softcap ? p_.scale / p_.softcap : p_.scale), cap = S::splat(p_.softcap);
    for (int c = 0; c < kt; c += W) {
      const V x = S::load(srow + c) * scale;
      S::store(srow + c, Softcap ? cap * S::tanh(x) : x);
    }
  }
  // s += -slope * |d(i) - j|, with diag = d(i) - j0.
  void alibi_row(float* srow, int kt, float neg_slope, float diag) const {
    const V iota = S::iota(), slope = S::splat(neg_slope), d = S::splat(diag);
    for (int c = 0; c < kt; c += W)
      S::store(srow + c, S::fma(S::abs(d - (S::splat(float(c)) + iota)), slope, S::load(srow + c)));
  }
  void add_row(float* srow, int kt, const float* values) const {
    for (int c = 0; c < kt; c += W) S::store(srow + c, S::load(srow + c) + S::load(values + c));
  }
  void add_scalar(float* srow, int kt, float value) const {
    const V x = S::splat(value);
    for (int c = 0; c < kt; c += W) S::store(srow + c, S::load(srow + c) + x);
  }

  // The last pass: optional scaling (when nothing else was to be added), the key intervals and
  // element-wise mask of a mixed tile (-inf outside), and the row maximum.
  template <bool Masked, bool Valid, bool Scale, bool Softcap>
  float mask_max(float* srow, int kt, int64_t j0, const RowKeys& keys, const float* valid, bool& has_key) const {
    const V iota = S::iota();
    const V scale = S::splat(Softcap ? p_.scale / p_.softcap : p_.scale), cap = S::splat(p_.softcap);
    const V lo = S::splat(float(keys.lo - j0)), hi = S::splat(float(keys.hi - j0));
    const V prefix_end = S::splat(float(keys.prefix_end - j0));
    V mx = S::splat(kNegInf);
    M seen = S::splat(0.0f) != S::splat(0.0f);
    for (int c = 0; c < kt; c += W) {
      V x = S::load(srow + c);
      if constexpr (Scale) x = Softcap ? cap * S::tanh(x * scale) : x * scale;
      if constexpr (Masked) {
        const V j = S::splat(float(c)) + iota;  // key index relative to j0
        M allow = ((j >= lo) & (j < hi)) | (j < prefix_end);
        if constexpr (Valid) allow = allow & (S::load(valid + c) != S::splat(0.0f));
        seen = seen | allow;
        x = S::select(allow, x, S::splat(kNegInf));
      }
      S::store(srow + c, x);
      mx = S::max_keep_nan(mx, x);
    }
    if (Masked && S::any(seen)) has_key = true;
    return S::hmax(mx);
  }


 private:
  const Problem& p_;
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
