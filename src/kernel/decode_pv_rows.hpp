// P·V of float32 and 16-bit V for the decode kernel (kernel/decode_kernel.hpp): full rows in
// register blocks, in column passes over the tile (pv_columns) or each V row read in order
// (pv_in_order, kernel/decode_in_order.hpp), and a mixed row over the keys it may attend
// (pv_masked_row). Out of the class only to keep each file short. Included by decode_kernel.hpp
// alone, after the class.
#pragma once

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <class Arch>
template <int R, class T>
inline void DecodeAttention<Arch>::pv_rows(const int* which, const int* active, const float* s, const T* v,
                                           int n, int64_t ahead, float* o) const {
  const float* prow[R];
  float* orow[R];
  for (int r = 0; r < R; ++r) {
    prow[r] = s + which[r] * KT;
    orow[r] = o + active[which[r]] * dv_pad_;
  }
  const int64_t vs = p_.kv.vs.l, dv_vec = p_.Dv / W * W;
  // Natively too for float32 V (AVX2, Zen 3, 1 thread: MHA 5.3 -> 4.8 ms, GQA 3.6 -> 3.0 ms), and
  // for 16-bit V rows of one query row where the columns take more than one pass (AVX2, MHA:
  // float16 2.41 -> 2.08 ms, bfloat16 2.65 -> 2.07; one pass already reads each row front to
  // back, its outputs in registers). With more rows the 16-bit rows' conversions and the outputs'
  // loads and stores cost more than the passes (GQA float16, two keys per pass: from DRAM 1.76 ->
  // 1.63 ms, but in cache 36 -> 49 ns per key), so they keep the passes.
  constexpr int64_t kOnePass = pv_columns_for(R) * W;
  if (kInOrderRows || std::is_same_v<T, float> || (R == 1 && dv_vec > kOnePass)) {
    pv_in_order<R>(prow, orow, v, vs, n, dv_vec, ahead);
  } else {
    int64_t c0 = 0;
    constexpr int C = pv_columns_for(R);
    for (; c0 + C * W <= dv_vec; c0 += C * W) pv_columns<R, C>(prow, orow, v, vs, n, c0, c0 == 0 ? ahead : 0);
    for (; c0 + W <= dv_vec; c0 += W) pv_columns<R, 1>(prow, orow, v, vs, n, c0, 0);
  }
  for (int64_t c = dv_vec; c < p_.Dv; ++c)  // columns past the last whole vector
    for (int r = 0; r < R; ++r) {
      float acc = orow[r][c];
      for (int j = 0; j < n; ++j) acc += prow[r][j] * element(v[j * vs + c]);
      orow[r][c] = acc;
    }
}

template <class Arch>
template <int R, int C, class T>
inline void DecodeAttention<Arch>::pv_columns(const float* const* prow, float* const* orow, const T* v,
                                              int64_t vs, int n, int64_t c0, int64_t ahead) const {
  const int64_t pf = prefetch_keys(v_row_bytes_);
  // bfloat16 rows two vectors at a time, the output columns held in the same pair order.
  constexpr bool pairs = kPairRows<T> && C % 2 == 0;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; c += 1 + pairs) {
      if constexpr (pairs) S::load_pair_order(orow[r] + c0 + c * W, acc[r] + c);
      else acc[r][c] = S::load(orow[r] + c0 + c * W);
    }
  for (int j = 0; j < n; ++j) {
    if (j + pf < ahead) prefetch_bytes(v + (j + pf) * vs, v_row_bytes_);
    const T* vr = v + j * vs + c0;
    V vv[C];
    for (int c = 0; c < C; c += 1 + pairs) {
      if constexpr (pairs) S::load_bf16_pair(vr + c * W, vv + c);
      else vv[c] = S::load(vr + c * W);
    }
    for (int r = 0; r < R; ++r) {
      const V pj = S::splat(prow[r][j]);
      for (int c = 0; c < C; ++c) acc[r][c] = S::fma(pj, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; c += 1 + pairs) {
      if constexpr (pairs) S::store_pair_order(orow[r] + c0 + c * W, acc[r] + c);
      else S::store(orow[r] + c0 + c * W, acc[r][c]);
    }
}

template <class Arch>
template <class T>
inline void DecodeAttention<Arch>::pv_masked_row(const Row& row, const float* p, const float* valid,
                                                 bool elementwise, int64_t j0, int64_t n, const T* v,
                                                 float* o) const {
  const int64_t vs = p_.kv.vs.l, dv_vec = p_.Dv / W * W;
  const RowKeys& keys = row.keys;
  auto allowed = [&](int64_t j) {  // j relative to j0
    return keys.allows(j0 + j) && (!elementwise || valid[j] != 0.0f);
  };
  for (int64_t c0 = 0; c0 < dv_vec; c0 += NV * W) {
    const int C = int(std::min<int64_t>(NV, (dv_vec - c0) / W));
    V acc[NV];
    for (int c = 0; c < C; ++c) acc[c] = S::load(o + c0 + c * W);
    for (int64_t j = 0; j < n; ++j) {
      if (!allowed(j)) continue;
      const V pj = S::splat(p[j]);
      const T* vr = v + j * vs + c0;
      for (int c = 0; c < C; ++c) acc[c] = S::fma(pj, S::load(vr + c * W), acc[c]);
    }
    for (int c = 0; c < C; ++c) S::store(o + c0 + c * W, acc[c]);
  }
  for (int64_t c = dv_vec; c < p_.Dv; ++c) {
    float acc = o[c];
    for (int64_t j = 0; j < n; ++j)
      if (allowed(j)) acc += p[j] * element(v[j * vs + c]);
    o[c] = acc;
  }
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
