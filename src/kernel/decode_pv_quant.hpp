// P·V of quantized V for the decode kernel (kernel/decode_kernel.hpp): in integers where the
// target's QuantDot has them (pv_integer), else V dequantized in registers, in passes of 16-column
// groups (pv_quant_groups, and pv_fixed for passes whose indices are known when compiled). Out of
// the class only to keep each file short. Included by decode_kernel.hpp alone, after the class.
#pragma once

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// P·V in integers where QuantDot has them (kIntegerValues): per block, each row's weights
// p_j x scale_j are rounded to int16 against the largest of them (unit = max / 32767), and each
// pair of keys meets a pair of weights in QuantDot::PV::madd (4 columns x 2 keys, exact int32 sums:
// |sum| <= 64 x 32767 x 127 < 2^31). Rounding a weight moves it by at most unit / 2, so a tile
// adds at most KT/2 x unit x 127 x |d| <= (KT / 65534) x max|V̂| to a row (docs/semantics.md).
// The weights of every block are made first, keys in lanes (PV::weights), from the tile's scales
// read once for all rows.
// use(r, j): whether row r adds key j (masked keys get weight 0). Returns false, having written
// nothing, when a used key's scale or weight is not finite (NaN/inf in V or in the scores), or
// the rows are wider than kIntegerMaxBlocks blocks: the float path then runs.
template <class Arch>
template <int R, class QRows, class Use>
inline bool DecodeAttention<Arch>::pv_integer(const float* const* prow, float* const* orow, QRows v, int n, Use&& use) const {
  if constexpr (QD::kIntegerValues) {
    using Dot = QuantDotOf<QD, QRows::T::kType>;
    constexpr int64_t kValueBytes = QRows::T::kValueBytes;
    const int64_t vs = p_.kv.vs.l, nb = quant_blocks(p_.Dv), scales_at = nb * kValueBytes;
    if (nb > kIntegerMaxBlocks) return false;
    using PV = typename QD::PV;
    constexpr int kPad = PV::kWeightStep;  // weights are made kPad keys at a time
    const int np = (n + kPad - 1) / kPad * kPad;
    // The tile's scales with keys in lanes; a key no row adds gets 0 (its scale may be NaN).
    alignas(16) float d[kIntegerMaxBlocks][KT + kPad];
    bool used[KT];
    for (int j = 0; j < n; ++j) {
      used[j] = false;
      for (int r = 0; r < R; ++r) used[j] |= use(r, j);
    }
    PV::tile_scales(v.p + scales_at, vs, n, nb, used, d[0], KT + kPad);
    for (int64_t blk = 0; blk < nb; ++blk)
      for (int j = n; j < np; ++j) d[blk][j] = 0.0f;
    alignas(16) int16_t w[R][kIntegerMaxBlocks][KT + kPad];
    float unit[R][kIntegerMaxBlocks];
    alignas(16) float pr[KT + kPad];
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < n; ++j) pr[j] = use(r, j) ? prow[r][j] : 0.0f;
      for (int j = n; j < np; ++j) pr[j] = 0.0f;  // and the partner of an odd last key weighs 0
      for (int64_t blk = 0; blk < nb; ++blk) {
        unit[r][blk] = PV::weights(pr, d[blk], np, w[r][blk]);
        if (!(unit[r][blk] <= std::numeric_limits<float>::max())) return false;  // a NaN or infinite weight
      }
    }
    using IV = typename PV::IV;
    using PS = Simd<typename PV::FArch>;
    constexpr int kVectors = 16 / PV::kLanes;  // per half block
    for (int64_t blk = 0; blk < nb; ++blk) {
      for (int half = 0; half < 2; ++half) {
        IV acc[R][kVectors];
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < kVectors; ++c) acc[r][c] = PV::zero();
        for (int j = 0; j < n; j += 2) {
          const uint8_t* a = v.p + j * vs + blk * kValueBytes;
          const uint8_t* b = j + 1 < n ? a + vs : a;  // weight 0 when it is the odd key's partner
          IV pairs[kVectors];
          Dot::template pv_pairs<PV>(a, b, half, pairs);
          for (int r = 0; r < R; ++r) {
            const IV wp = PV::weight_pair(w[r][blk] + j);
            for (int c = 0; c < kVectors; ++c) acc[r][c] = PV::madd(pairs[c], wp, acc[r][c]);
          }
        }
        const int64_t c0 = blk * 32 + half * 16;
        for (int r = 0; r < R; ++r) {
          const auto u = PS::splat(unit[r][blk]);
          for (int c = 0; c < kVectors; ++c) {
            float* out = orow[r] + c0 + PV::kLanes * c;
            PS::store(out, PS::fma(PV::to_float(acc[r][c]), u, PS::load(out)));
          }
        }
      }
    }
    return true;
  } else {
    (void)prow; (void)orow; (void)v; (void)n; (void)use;
    return false;
  }
}

// Columns [c0, c0 + 16 NGF) of R rows, as pv_quant_groups, with every index known when compiled
// so the accumulators stay in registers (measured: indexed by pv_quant_groups' loop over groups,
// they lived on the stack, a load and a store per multiply-add: avx2 GQA q8 40.5 -> 25.5 ns per
// key and KV head from L2). NGF = 1: one half block (c0 % 32 says which); even: whole blocks
// from a block boundary. At most 8 accumulators: GCC 12 keeps 16 zmm of them on the stack
// whatever the indices.
template <class Arch>
template <int R, int NGF, class QRows, class Use>
inline void DecodeAttention<Arch>::pv_fixed(const float* const* prow, float* const* orow, QRows v, int n, int64_t c0, int64_t ahead, Use&& use) const {
  using Dot = QuantDotOf<QD, QRows::T::kType>;
  constexpr int64_t kValueBytes = QRows::T::kValueBytes;
  constexpr int GV = kGroupVectors, NX = NGF * GV;
  static_assert(NGF == 1 || NGF % 2 == 0, "one half block or whole blocks");
  // The block scale multiplies whichever is fewer: the block's value vectors (once for all rows),
  // or each row's weight p_j (fewer rows than vectors: MHA's one row, 4 vectors a block on AVX2;
  // with q8's dropped zero term, AVX2, Zen 3, from DRAM: MHA q8 1.79 -> 1.71 ms, q4 1.49 -> 1.40).
  constexpr bool kScaleWeights = R < std::min(2, NGF) * GV;
  const int64_t vs = p_.kv.vs.l, scales_at = quant_blocks(p_.Dv) * kValueBytes, pf = prefetch_keys(v_row_bytes_);
  const int64_t blk0 = c0 / kQuantBlock, half = (c0 % kQuantBlock) / 16;
  V acc[R][NX];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NX; ++c) acc[r][c] = S::load(orow[r] + c0 + c * W);
  for (int j = 0; j < n; ++j) {
    if (j + pf < ahead) prefetch_bytes(v.p + (j + pf) * vs, v_row_bytes_);
    if (!use(j)) continue;
    const uint8_t* vr = v.p + j * vs;
    V x[NX + GV], dv[(NGF + 1) / 2];
    for (int b = 0; b < (NGF + 1) / 2; ++b) {
      const uint8_t* values = vr + (blk0 + b) * kValueBytes;
      float d;
      std::memcpy(&d, vr + scales_at + 4 * (blk0 + b), 4);
      V* lo = x + 2 * b * GV;
      if (NGF == 1) Dot::dequant(values, half, 0, 1, lo, lo + GV);
      else if (Dot::dequant(values, 0, 0, 2, lo, lo + GV) == 1) Dot::dequant(values, 1, 1, 2, lo + GV, lo + 2 * GV);  // q8: a half a call
      dv[b] = S::splat(d);
      if constexpr (!kScaleWeights)
        for (int c = 0; c < std::min(2, NGF) * GV; ++c) lo[c] = lo[c] * dv[b];
    }
    for (int r = 0; r < R; ++r) {
      const V pj = S::splat(prow[r][j]);
      for (int b = 0; b < (NGF + 1) / 2; ++b) {
        const V w = kScaleWeights ? pj * dv[b] : pj;
        for (int c = 2 * b * GV; c < std::min(NX, 2 * (b + 1) * GV); ++c) acc[r][c] = S::fma(w, x[c], acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NX; ++c) S::store(orow[r] + c0 + c * W, acc[r][c]);
}

// Columns [c0, c0 + 16 NG) (clipped to dv_pad) of R rows over the tile's keys that `use` admits.
// A function of its own on x86, as GCC chose before the dtype traits (inlined into the tile, the
// MHA q8 decode step measured 2-6% slower on AVX-512 VNNI, on a busy 2-core VM).
template <class Arch>
template <int R, int NG, class QRows, class Use>
void DecodeAttention<Arch>::pv_quant_groups(const float* const* prow, float* const* orow, QRows v, int n, int64_t c0, int64_t ahead,
                     Use&& use) const {
  using Dot = QuantDotOf<QD, QRows::T::kType>;
  constexpr int64_t kValueBytes = QRows::T::kValueBytes;
  constexpr int GV = kGroupVectors;
  const int ng = int(std::min<int64_t>(NG, (dv_pad_ - c0) / 16));
  const int64_t vs = p_.kv.vs.l, scales_at = quant_blocks(p_.Dv) * kValueBytes, pf = prefetch_keys(v_row_bytes_);
  // Passes at fixed indices where they can be had (pv_fixed): one group, or whole blocks.
  constexpr int kFixed = NG == 1 ? 1 : NG % 2 == 0 ? std::min(NG, std::max(2, 8 / (R * GV)) / 2 * 2) : 0;
  if constexpr (kFixed > 0) {
    if (kFixed == 1 || ng == NG) {
      for (int g = 0; g < ng; g += kFixed) pv_fixed<R, kFixed>(prow, orow, v, n, c0 + 16 * g, g == 0 ? ahead : 0, use);
      return;
    }
  }
  V acc[R][NG * GV];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < ng * GV; ++x) acc[r][x] = S::load(orow[r] + c0 + x * W);
  for (int j = 0; j < n; ++j) {
    if (j + pf < ahead) prefetch_bytes(v.p + (j + pf) * vs, v_row_bytes_);
    if (!use(j)) continue;
    const uint8_t* vr = v.p + j * vs;
    V pj[R];  // one broadcast of p_j per row; the block scale multiplies the values, once for all rows
    for (int r = 0; r < R; ++r) pj[r] = S::splat(prow[r][j]);
    for (int g = 0; g < ng;) {
      const int64_t col = c0 + 16 * g, blk = col / kQuantBlock, half = (col % kQuantBlock) / 16;
      float d;
      std::memcpy(&d, vr + scales_at + 4 * blk, 4);
      const V dv = S::splat(d);
      V x[2 * GV];
      const int groups = Dot::dequant(vr + blk * kValueBytes, half, g, ng, x, x + GV);
      for (int c = 0; c < groups * GV; ++c) x[c] = x[c] * dv;
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < groups * GV; ++c) acc[r][g * GV + c] = S::fma(pj[r], x[c], acc[r][g * GV + c]);
      g += groups;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < ng * GV; ++x) S::store(orow[r] + c0 + x * W, acc[r][x]);
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
