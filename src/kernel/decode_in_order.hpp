// The decode kernel's in-order reads (kernel/decode_kernel.hpp, kInOrderRows: targets without
// software prefetch, WebAssembly; natively too for P·V over float32 V, and over 16-bit V of one
// query row: pv_rows): each K and V row read front to back, one stream the hardware's prefetcher
// follows. 16-bit rows go 8 values per load where the target has load8 (SIMD128), whose
// short half conversion is exact but for exponent 31, which these functions then redo. Out of the
// class only to keep each file short. Included by decode_kernel.hpp alone, after the class.
#pragma once

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// acc[r * KB] = q_r · k for RB query rows. Two partial sums per row keep two add chains in flight
// where RB is small.
template <class Arch>
template <int RB, int KB, class T>
MASKATTN_DISPATCH_INLINE inline void DecodeAttention<Arch>::dot_in_order(const float* const* q, const T* kr,
                                                                        int64_t d_vec, V* acc) const {
  if constexpr (!std::is_same_v<T, float> && S::kLoads8) {
    if (dot_in_order8<RB, KB>(q, kr, d_vec, acc)) return;
    // The row holds a half of exponent 31: the exact conversion below reads it as infinity or NaN.
  }
  constexpr int P = RB <= 2 ? 2 : 1;
  V part[RB][P];
  for (int r = 0; r < RB; ++r)
    for (int x = 0; x < P; ++x) part[r][x] = S::splat(0.0f);
  int64_t d = 0;
  for (; d + P * W <= d_vec; d += P * W)
    for (int x = 0; x < P; ++x) {
      const V kv = S::load(kr + d + x * W);
      for (int r = 0; r < RB; ++r) part[r][x] = S::fma(S::load(q[r] + d + x * W), kv, part[r][x]);
    }
  for (; d < d_vec; d += W) {
    const V kv = S::load(kr + d);
    for (int r = 0; r < RB; ++r) part[r][0] = S::fma(S::load(q[r] + d), kv, part[r][0]);
  }
  for (int r = 0; r < RB; ++r) {
    acc[r * KB] = part[r][0];
    for (int x = 1; x < P; ++x) acc[r * KB] = acc[r * KB] + part[r][x];
  }
}

// dot_in_order, 8 values per load (S::load8). False, with acc unwritten, when a half of exponent 31
// came by (load8 reads those as finite values): the caller takes the exact conversion.
template <class Arch>
template <int RB, int KB, class T>
MASKATTN_DISPATCH_INLINE inline bool DecodeAttention<Arch>::dot_in_order8(const float* const* q, const T* kr,
                                                                         int64_t d_vec, V* acc) const {
  constexpr int P = RB <= 2 ? 2 : 1;
  V part[RB][P];
  for (int r = 0; r < RB; ++r)
    for (int x = 0; x < P; ++x) part[r][x] = S::splat(0.0f);
  typename S::Seen seen = S::seen_none();
  int64_t d = 0;
  for (; d + 2 * W <= d_vec; d += 2 * W) {
    V kv[2];
    S::load8(kr + d, kv, seen);
    for (int x = 0; x < 2; ++x)
      for (int r = 0; r < RB; ++r) part[r][x % P] = S::fma(S::load(q[r] + d + x * W), kv[x], part[r][x % P]);
  }
  for (; d < d_vec; d += W) {
    const V kv = S::load(kr + d);
    for (int r = 0; r < RB; ++r) part[r][0] = S::fma(S::load(q[r] + d), kv, part[r][0]);
  }
  if constexpr (std::is_same_v<T, uint16_t>)
    if (S::any_exponent31(seen)) return false;
  for (int r = 0; r < RB; ++r) {
    acc[r * KB] = part[r][0];
    for (int x = 1; x < P; ++x) acc[r * KB] = acc[r * KB] + part[r][x];
  }
  return true;
}

// o[r] += p[r][j] v_j, each V row read once, front to back, into the R output rows where they are
// (in L1): a load and a store of the output per vector, but one stream the hardware follows.
// 16-bit rows with load8 go two at a time, so each output vector is loaded and stored once per two
// rows (SIMD128, Zen 3: the GQA bfloat16 step 4.1-4.2 -> 3.3-3.4 ms, float16 5.1-5.2 -> 4.7-4.9).
template <class Arch>
template <int R, class T>
inline void DecodeAttention<Arch>::pv_in_order(const float* const* prow, float* const* orow, const T* v, int64_t vs,
                                               int n, int64_t dv_vec, int64_t ahead) const {
  if constexpr (!std::is_same_v<T, float> && S::kLoads8) {
    int j = 0;
    for (; j + 2 <= n; j += 2) pv_keys8<R, 2>(prow, orow, v + j * vs, vs, j, dv_vec);
    if (j < n) pv_keys8<R, 1>(prow, orow, v + j * vs, vs, j, dv_vec);
    return;
  }
  const int64_t pf = prefetch_keys(v_row_bytes_);
  int j = 0;
  // Natively, two rows at a time where both keys' weights fit in registers beside the two V
  // vectors: each output vector loaded and stored once per two keys (AVX2, Zen 3, GQA float32 step:
  // in cache 55 -> 42 ns per key and KV head, from DRAM 2.85 -> 2.51 ms at 1 thread, 1.71 -> 1.39
  // at 2; MHA, memory-bound, the same). Not in WebAssembly, where it measured slower (GQA 4.76 ->
  // 5.39 ms, docs/performance.md).
  if constexpr (kSoftwarePrefetch && 2 * R + 3 <= S::kRegisters)
    for (; j + 2 <= n; j += 2) {
      for (int k = 0; k < 2; ++k)
        if (j + k + pf < ahead) prefetch_bytes(v + (j + k + pf) * vs, v_row_bytes_);
      const T* v0 = v + j * vs;
      const T* v1 = v0 + vs;
      V p0[R], p1[R];
      for (int r = 0; r < R; ++r) {
        p0[r] = S::splat(prow[r][j]);
        p1[r] = S::splat(prow[r][j + 1]);
      }
      for (int64_t c = 0; c < dv_vec; c += W) {
        const V a = S::load(v0 + c), b = S::load(v1 + c);
        for (int r = 0; r < R; ++r) S::store(orow[r] + c, S::fma(p1[r], b, S::fma(p0[r], a, S::load(orow[r] + c))));
      }
    }
  for (; j < n; ++j) {
    if (kSoftwarePrefetch && j + pf < ahead) prefetch_bytes(v + (j + pf) * vs, v_row_bytes_);
    const T* vr = v + j * vs;
    V pj[R];
    for (int r = 0; r < R; ++r) pj[r] = S::splat(prow[r][j]);
    for (int64_t c = 0; c < dv_vec; c += W) {
      const V vv = S::load(vr + c);
      for (int r = 0; r < R; ++r) S::store(orow[r] + c, S::fma(pj[r], vv, S::load(orow[r] + c)));
    }
  }
}

// K consecutive 16-bit V rows (keys j..j+K-1, from vr) into the R output rows, 8 values per load. A
// half of exponent 31, which load8 reads as a finite value, then has p times its exact value added
// once more: what the short form added there is finite, so the sum is the infinity or NaN (of the
// same sign, or NaN where the exact sum is NaN) that the exact conversion gives.
template <class Arch>
template <int R, int K, class T>
inline void DecodeAttention<Arch>::pv_keys8(const float* const* prow, float* const* orow, const T* vr, int64_t vs,
                                            int j, int64_t dv_vec) const {
  V p[K][R];
  for (int k = 0; k < K; ++k)
    for (int r = 0; r < R; ++r) p[k][r] = S::splat(prow[r][j + k]);
  typename S::Seen seen = S::seen_none();
  int64_t c = 0;
  for (; c + 2 * W <= dv_vec; c += 2 * W) {
    V vv[K][2];
    for (int k = 0; k < K; ++k) S::load8(vr + k * vs + c, vv[k], seen);
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < 2; ++x) {
        V o = S::load(orow[r] + c + x * W);
        for (int k = 0; k < K; ++k) o = S::fma(p[k][r], vv[k][x], o);
        S::store(orow[r] + c + x * W, o);
      }
  }
  const int64_t c8 = c;
  for (; c < dv_vec; c += W)
    for (int k = 0; k < K; ++k) {
      const V vv = S::load(vr + k * vs + c);
      for (int r = 0; r < R; ++r) S::store(orow[r] + c, S::fma(p[k][r], vv, S::load(orow[r] + c)));
    }
  if constexpr (std::is_same_v<T, uint16_t>)
    if (S::any_exponent31(seen))
      for (int k = 0; k < K; ++k)
        for (int64_t x = 0; x < c8; ++x)
          if ((vr[k * vs + x] & 0x7c00) == 0x7c00)
            for (int r = 0; r < R; ++r) orow[r][x] += prow[r][j + k] * element(vr[k * vs + x]);
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
