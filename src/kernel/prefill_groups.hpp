// The group steps of the prefill kernel (kernel/prefill_kernel.hpp), one group of NK keys for one
// block of query rows, its scores in registers throughout: Q·Kᵀ, the logits and masks, the weights
// (only when asked for), the online softmax and P·V. Out of the class only to keep each file short;
// each is inline as it was inside the class (MASKATTN_MICROTILE: always inlined into group_step).
// Included by prefill_kernel.hpp alone, after the class.
#pragma once

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// x[j][r] = Q·K of the block's rows (vectors r) with key j: per d, R vectors of Q and one
// broadcast K element per key, accumulators in registers across all of D.
template <class Arch>
template <int R>
MASKATTN_MICROTILE void PrefillAttention<Arch>::qk_group(const float* qb, const float* k, int64_t kst, V (&x)[NK][R]) const {
  // Accumulators local until the end (x may alias memory the loop reads: stored through it, they
  // would go to memory on every step), addresses in pointer-sized steps (wasm32: no 64-bit index
  // arithmetic per load).
  V acc[NK][R];
  for (int j = 0; j < NK; ++j)
    for (int r = 0; r < R; ++r) acc[j][r] = S::splat(0.0f);
  std::ptrdiff_t ko[NK];
  for (int j = 0; j < NK; ++j) ko[j] = std::ptrdiff_t(j * kst);
  const float* const q_end = qb + p_.D * QR;
  for (const float* q = qb; q != q_end; q += QR, ++k) {
    V qv[R];
    for (int r = 0; r < R; ++r) qv[r] = S::load(q + r * W);
    for (int j = 0; j < NK; ++j) {
      const V kv = S::splat(k[ko[j]]);
      for (int r = 0; r < R; ++r) acc[j][r] = S::fma(kv, qv[r], acc[j][r]);
    }
  }
  for (int j = 0; j < NK; ++j)
    for (int r = 0; r < R; ++r) x[j][r] = acc[j][r];
}

// Raw dot products -> natural-unit logits (scale or softcap, ALiBi, bias) and, in a mixed tile,
// -inf where a rule masks the pair: the rows' key intervals as lane-wise compares, or the tile's
// element-wise bits (element_tiles; the intervals folded in) as one bit test per vector.
// `allow_out` (NaN-safe P·V) receives 1/0 per pair.
template <class Arch>
template <int R>
MASKATTN_MICROTILE void PrefillAttention<Arch>::logits_group(V (&x)[NK][R], const Block& blk, int64_t jg, bool masked, const uint32_t* bits,
                                     int bit0, const float* bias, M (&seen)[R], float* allow_out) const {
  if (p_.softcap > 0) {
    const V scale = S::splat(p_.scale / p_.softcap), cap = S::splat(p_.softcap);
    for (int j = 0; j < NK; ++j)
      for (int r = 0; r < R; ++r) x[j][r] = cap * S::tanh(x[j][r] * scale);
  } else {
    const V scale = S::splat(p_.scale);
    for (int j = 0; j < NK; ++j)
      for (int r = 0; r < R; ++r) x[j][r] = x[j][r] * scale;
  }
  if (p_.alibi_slopes) {  // s += -slope * |d(i) - j|
    for (int r = 0; r < R; ++r) {
      const V diag = S::load(blk.diag + r * W), slope = S::load(blk.neg_slope + r * W);
      for (int j = 0; j < NK; ++j) x[j][r] = S::fma(S::abs(diag - S::splat(float(jg + j - blk.origin))), slope, x[j][r]);
    }
  }
  if (bias)
    for (int j = 0; j < NK; ++j)
      for (int r = 0; r < R; ++r) x[j][r] = x[j][r] + S::load(bias + j * QR + r * W);
  if (!masked) return;
  for (int r = 0; r < R; ++r) {
    const V lo = S::load(blk.lo + r * W), hi = S::load(blk.hi + r * W), pe = S::load(blk.pe + r * W);
    const auto word = bits ? S::load_bits(bits + r * W) >> bit0 : typename S::I(0);
    for (int j = 0; j < NK; ++j) {
      M allow;
      if (bits) {  // the intervals are in the bits already, and `seen` was set per tile
        allow = S::bit_set(word, j);
      } else {
        const V pos = S::splat(float(jg + j - blk.origin));  // the lanes are relative to blk.origin
        allow = ((pos >= lo) & (pos < hi)) | (pos < pe);
        seen[r] = seen[r] | allow;
      }
      x[j][r] = S::select(allow, x[j][r], S::splat(kNegInf));
      if (allow_out) S::store(allow_out + j * QR + r * W, S::select(allow, S::splat(1.0f), S::splat(0.0f)));
    }
  }
}

// Logits of the group into the weights rows (which hold logits until the rows finish): lanes to
// rows through a small buffer. Only when weights are asked for.
template <class Arch>
template <int R>
inline void PrefillAttention<Arch>::store_weights(const V (&x)[NK][R], int64_t b, const Block& blk, int64_t jg, int nk, float* buf) const {
  for (int j = 0; j < NK; ++j)
    for (int r = 0; r < R; ++r) S::store(buf + j * QR + r * W, x[j][r]);
  for (int r = 0; r < std::min(blk.n_rows, R * W); ++r) {
    if (!blk.active[r]) continue;
    float* w = weights_row(b, blk, r) + jg;
    for (int j = 0; j < nk; ++j) w[j] = buf[j * QR + r];
  }
}

// Online softmax of the group, lane by lane: x becomes e^(x - m). m moves (and l and Oᵀ are
// rescaled by e^(m_old - m_new)) only when some row's group max exceeds its m by kRescaleAbove.
// m stays NaN once NaN; -inf rows (nothing allowed yet) give weights 0, never -inf - -inf.
// (Scores stay in natural units: scaling Q by scale·log2 e as it is loaded saved two multiplies a
// score, but that constant's rounding is one systematic error on every logit difference, 10x the
// plain fp32 error on logits near 1e4: tests/js/onnx-oracle.test.mjs.)
template <class Arch>
template <int R>
MASKATTN_MICROTILE void PrefillAttention<Arch>::softmax_group(V (&x)[NK][R], V (&m)[R], V (&l)[R], float* oT, bool& o_zero) const {
  const V log2e = S::splat(kLog2e), ninf = S::splat(kNegInf), above = S::splat(kRescaleAbove);
  auto exp = [&](const V& d) { return S::exp2(d * log2e); };  // e^d
  V gmax[R];
  bool rescale = false;
  for (int r = 0; r < R; ++r) {
    gmax[r] = x[0][r];
    // A NaN score may be dropped from the max: it makes its row's weight, sum and output NaN anyway.
    for (int j = 1; j < NK; ++j) gmax[r] = S::max(gmax[r], x[j][r]);
    rescale = rescale || S::any(gmax[r] > m[r] + above);
  }
  if (rescale) {
    V alpha[R];
    for (int r = 0; r < R; ++r) {
      const V m_new = S::select(gmax[r] > m[r], gmax[r], m[r]);
      alpha[r] = S::select(m_new == m[r], S::splat(1.0f), exp(m[r] - m_new));
      l[r] = l[r] * alpha[r];
      m[r] = m_new;
    }
    if (!o_zero) {
      float* o = oT;
      for (int64_t c = 0; c < p_.Dv; ++c, o += QR)
        for (int r = 0; r < R; ++r) S::store(o + r * W, S::load(o + r * W) * alpha[r]);
    }
  }
  o_zero = false;
  for (int r = 0; r < R; ++r) {
    const V ms = S::select(m[r] == ninf, S::splat(0.0f), m[r]);
    V sum = S::splat(0.0f);
    for (int j = 0; j < NK; ++j) {
      // (x - m) * log2(e) rather than x*log2(e) - m*log2(e): no overflow for |x| near FLT_MAX.
      x[j][r] = exp(x[j][r] - ms);
      sum = sum + x[j][r];
    }
    l[r] = l[r] + sum;
  }
}

// Oᵀ[c][rows] += Σ_j V[j][c] * p[j][rows]: per output column, R vectors of O, one broadcast V
// element per key.
template <class Arch>
template <int R, bool Init>
MASKATTN_MICROTILE void PrefillAttention<Arch>::pv_group(float* oT, const float* v, int64_t vst, const V (&p_in)[NK][R]) const {
  V p[NK][R];  // a local copy: the stores to Oᵀ may alias p_in's memory, and would reload it
  for (int j = 0; j < NK; ++j)
    for (int r = 0; r < R; ++r) p[j][r] = p_in[j][r];
  std::ptrdiff_t vo[NK];
  for (int j = 0; j < NK; ++j) vo[j] = std::ptrdiff_t(j * vst);
  // Two columns per step (2R accumulator chains in flight, each NK multiply-adds deep) where the
  // registers hold them beside the scores, else one.
  constexpr bool kTwo = NK * R + 2 * R + 2 < S::kRegisters;
  float* const o_end = oT + (kTwo ? p_.Dv & ~int64_t(1) : 0) * QR;
  for (; oT != o_end; oT += 2 * QR, v += 2) {
    V o0[R], o1[R];
    for (int r = 0; r < R; ++r) {
      o0[r] = Init ? S::splat(0.0f) : S::load(oT + r * W);
      o1[r] = Init ? S::splat(0.0f) : S::load(oT + QR + r * W);
    }
    for (int j = 0; j < NK; ++j) {
      const V v0 = S::splat(v[vo[j]]), v1 = S::splat(v[vo[j] + 1]);
      for (int r = 0; r < R; ++r) {
        o0[r] = S::fma(v0, p[j][r], o0[r]);
        o1[r] = S::fma(v1, p[j][r], o1[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      S::store(oT + r * W, o0[r]);
      S::store(oT + QR + r * W, o1[r]);
    }
  }
  for (float* const end = oT + (kTwo ? p_.Dv & 1 : p_.Dv) * QR; oT != end; oT += QR, ++v) {
    V o[R];
    for (int r = 0; r < R; ++r) o[r] = Init ? S::splat(0.0f) : S::load(oT + r * W);
    for (int j = 0; j < NK; ++j) {
      const V vv = S::splat(v[vo[j]]);
      for (int r = 0; r < R; ++r) o[r] = S::fma(vv, p[j][r], o[r]);
    }
    for (int r = 0; r < R; ++r) S::store(oT + r * W, o[r]);
  }
}

// P·V of a mixed tile whose V holds NaN or inf: a masked pair adds nothing, whatever its V
// (0 * NaN would leak); an allowed pair adds p * V even when p is 0, as the reference does.
template <class Arch>
template <int R>
inline void PrefillAttention<Arch>::pv_group_guarded(float* oT, const float* v, int64_t vst, const V (&p)[NK][R], const float* allow, bool init) const {
  const V zero = S::splat(0.0f);
  for (int64_t c = 0; c < p_.Dv; ++c, oT += QR, ++v) {
    V o[R];
    for (int r = 0; r < R; ++r) o[r] = init ? zero : S::load(oT + r * W);
    for (int j = 0; j < NK; ++j) {
      const V vv = S::splat(v[j * vst]);
      for (int r = 0; r < R; ++r) o[r] = o[r] + S::select(S::load(allow + j * QR + r * W) != zero, vv * p[j][r], zero);
    }
    for (int r = 0; r < R; ++r) S::store(oT + r * W, o[r]);
  }
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
