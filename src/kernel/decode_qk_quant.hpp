// Q·Kᵀ over quantized keys for the decode kernel (kernel/decode_kernel.hpp): the same register
// blocking as float keys over QuantDot's float lanes (L), integer dot products per block
// (kernel/quant_dot.hpp), or L keys at a time with keys in lanes where QuantDot has qk_tile. Out of
// the class only to keep each file short. Included by decode_kernel.hpp alone, after the class.
//
// Reads ahead, natively: each key row 16 keys on (request_keys), and the tile's own V rows (v,
// where P·V reads them in column passes: DecodeAttention::v_in_passes) while its Q·Kᵀ runs, so
// that they are in L1 when P·V starts. For quantized V (passes of 32 columns, the first reading a
// row's first block only, about 3 ns per key) P·V's own requests 16 keys ahead came too late from
// DRAM (AVX2, Zen 3, from DRAM, ns per key and KV head: MHA q8 28.5 -> 26.5, q4 21.5 -> 20.6, GQA
// q8 49.8 -> 46.5; with the cache resident 3% slower, 18.9 -> 19.6). Dropping P·V's requests then
// cost MHA q8 2 ns per key, so both stay.

#pragma once

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <class Arch>
inline void DecodeAttention<Arch>::qk_rows_quant(const QRow* const* qq, int n_rows, const uint8_t* k, int n, int kt,
                                                 int64_t ahead, const uint8_t* v, float* s) const {
  // Rows per register block as in qk_rows: 1, 2 (all that 4 lanes allow), else 4; 8 for larger groups
  // where 16 keys are transposed to lanes (qk_tile on zmm: the transposes shared by twice the rows).
  const bool tile = p_.kv.k_type == KVType::q4 ? HasQkTile<QD, true>::value : HasQkTile<QD, false>::value;
  const int rb = L == 1 || n_rows == 1 ? 1
               : n_rows == 2 || (L == 4 && !(tile && n_rows >= 4)) ? 2
               : tile && L == 16 && n_rows >= 8 ? 8 : 4;
  auto run = [&](auto rows) {
    constexpr int RB = decltype(rows)::value;
    if constexpr (L % RB == 0)
      with_kv_type(p_.kv.k_type, [&](auto traits) MASKATTN_DISPATCH_INLINE {
        if constexpr (decltype(traits)::kQuantized) qk_block_quant<RB, decltype(traits)>(qq, n_rows, k, n, kt, ahead, v, s);
      });
  };
  if (rb == 1) run(std::integral_constant<int, 1>{});
  else if (rb == 2) run(std::integral_constant<int, 2>{});
  else if (rb == 4) run(std::integral_constant<int, 4>{});
  else if constexpr ((HasQkTile<QD, false>::value || HasQkTile<QD, true>::value) && L == 16) run(std::integral_constant<int, 8>{});
}

// Before Q·Kᵀ over quantized keys [j, j + count) of a tile at k: their rows ahead requested by QD's
// block loops where it can (returned: the bytes ahead to pass; quant_dot.hpp, RequestsKeyRows),
// else here, a tile ahead: each line once where the rows are packed (144-byte q8 rows span 2.25
// lines; requested per row, 3), else each row's own lines.
template <class Arch>
MASKATTN_PREFETCH_INLINE int64_t DecodeAttention<Arch>::request_keys(const uint8_t* k, int j, int count, int64_t ahead,
                                                                     int64_t ks) const {
  const int64_t d = RequestsKeyRows<QD>::value ? prefetch_keys(k_row_bytes_) : KT;
  const int64_t from = j + d, to = std::min<int64_t>(from + count, ahead);
  if (RequestsKeyRows<QD>::value && from + count <= ahead) return d * ks;
  if (ks == k_row_bytes_) prefetch_bytes(k + from * ks, std::max<int64_t>(0, to - from) * ks);
  else for (int64_t c = from; c < to; ++c) prefetch_row(k + c * ks, k_row_bytes_);
  return 0;
}

// D = 128, 256 and 512 (4, 8, 16 blocks: the head sizes models use) get copies with the block count
// known at compile time: the block loop unrolls and each row's query blocks are loaded once per
// register block, not per key (measured: the MHA q4 decode step 0.87 -> 0.47 ms with L3-resident
// data, Zen 5, 1 thread; GQA q8 from DRAM at D = 256 1.89 -> 1.80 ms, at 512 2.03 -> 1.97 ms, AVX2,
// Zen 3).
template <class Arch>
template <int RB, class KTraits>
MASKATTN_NOINLINE_WASM void DecodeAttention<Arch>::qk_block_quant(const QRow* const* qq, int n_rows, const uint8_t* k,
                                                                  int n, int kt, int64_t ahead, const uint8_t* v,
                                                                  float* s) const {
  if (nb_ == 4) qk_block_quant_nb<RB, KTraits, 4>(qq, n_rows, k, n, kt, ahead, v, s);
  else if (nb_ == 8) qk_block_quant_nb<RB, KTraits, 8>(qq, n_rows, k, n, kt, ahead, v, s);
  else if (nb_ == 16) qk_block_quant_nb<RB, KTraits, 16>(qq, n_rows, k, n, kt, ahead, v, s);
  else qk_block_quant_nb<RB, KTraits, 0>(qq, n_rows, k, n, kt, ahead, v, s);
}

template <class Arch>
template <int RB, class KTraits, int NB>  // NB: the block count, or 0 for nb_
MASKATTN_DISPATCH_INLINE inline void DecodeAttention<Arch>::qk_block_quant_nb(const QRow* const* qq, int n_rows,
                                                                              const uint8_t* k, int n, int kt,
                                                                              int64_t ahead, const uint8_t* v,
                                                                              float* s) const {
  constexpr int KB = L / RB;
  static_assert(RB * KB == L, "one accumulator per lane of the reduced vector");
  const int64_t ks = p_.kv.ks.l, vs = v_stride_bytes_, nb = NB ? NB : nb_, scales_at = nb * KTraits::kValueBytes;
  quant_dot_check_here();
  if constexpr (HasQkTile<QD, KTraits::kType == KVType::q4>::value && RB >= 4) {  // L keys at a time, keys in lanes (measured: 2 rows gain nothing, 1 loses 7-15%)
    for (int r0 = 0; r0 < n_rows; r0 += RB) {
      const QRow* q[RB];
      for (int r = 0; r < RB; ++r) q[r] = qq[std::min(r0 + r, n_rows - 1)];
      for (int j = 0; j < kt; j += L) {
        const uint8_t* kr[L];
        for (int c = 0; c < L; ++c) kr[c] = k + std::min(j + c, n - 1) * ks;
        const int64_t pf = r0 == 0 ? request_keys(k, j, L, ahead, ks) : 0;
        if (v && r0 == 0)
          for (int c = 0; c < L; ++c) prefetch_row(v + std::min(j + c, n - 1) * vs, v_row_bytes_);
        QuantDotOf<QD, KTraits::kType>::template qk_tile<RB, NB>(q, kr, scales_at, nb, s + r0 * KT + j, KT,
                                                                 std::min(RB, n_rows - r0), pf);
      }
    }
    return;
  }
  with_quant_dot_form<QD, KTraits::kType == KVType::q4>([&](auto form) MASKATTN_ALWAYS_INLINE {
    constexpr int Form = decltype(form)::value;
    if constexpr (HasForms<QD>::value) qk_rows_quant_form<RB, KTraits, NB, Form>(qq, n_rows, k, n, kt, ahead, v, s);
    else qk_rows_quant<RB, KTraits, NB, Form>(qq, n_rows, k, n, kt, ahead, v, s);
  });
}

// Where QD has several forms, each (and each block count) is a function of its own in
// WebAssembly: one function holding them all ran the MHA q8 step 4% slower (V8, Node 20), and
// with one form the rows stay inline (the SIMD128 build's GQA q8 step 2% slower out of line).
template <class Arch>
template <int RB, class KTraits, int NB, int Form>
MASKATTN_NOINLINE_WASM void DecodeAttention<Arch>::qk_rows_quant_form(const QRow* const* qq, int n_rows,
                                                                      const uint8_t* k, int n, int kt, int64_t ahead,
                                                                      const uint8_t* v, float* s) const {
  qk_rows_quant<RB, KTraits, NB, Form>(qq, n_rows, k, n, kt, ahead, v, s);
}

// One key row per dot() call, in one of QD's forms (quant_dot.hpp, with_quant_dot_form).
template <class Arch>
template <int RB, class KTraits, int NB, int Form>
MASKATTN_DISPATCH_INLINE inline void DecodeAttention<Arch>::qk_rows_quant(const QRow* const* qq, int n_rows,
                                                                          const uint8_t* k, int n, int kt,
                                                                          int64_t ahead, const uint8_t* v,
                                                                          float* s) const {
  constexpr int KB = L / RB;
  const int64_t ks = p_.kv.ks.l, vs = v_stride_bytes_, nb = NB ? NB : nb_, scales_at = nb * KTraits::kValueBytes;
  alignas(64) float dots[L];
  for (int r0 = 0; r0 < n_rows; r0 += RB) {
    const QRow* q[RB];
    for (int r = 0; r < RB; ++r) q[r] = qq[std::min(r0 + r, n_rows - 1)];
    for (int j = 0; j < kt; j += KB) {
      // Where the kernel requests them, each key's row a tile ahead (measured: the float kernels'
      // 16-key distance left the quantized kernel waiting on memory; a whole tile requested at
      // once at the tile's start stalled the float kernels' own loads).
      const int64_t pf = r0 == 0 ? request_keys(k, j, KB, ahead, ks) : 0;
      FV acc[L];
      for (int x = 0; x < L; ++x) acc[x] = FS::splat(0.0f);
      // Unrolled: the KB accumulators stay in registers (measured: as a loop they round-trip the stack).
      MASKATTN_UNROLL_16
      for (int c = 0; c < KB; ++c) {
        const uint8_t* kr = k + std::min(j + c, n - 1) * ks;
        if (v && r0 == 0) prefetch_row(v + std::min(j + c, n - 1) * vs, v_row_bytes_);
        QuantDotOf<QD, KTraits::kType>::template dot<RB, Form>(q, kr, reinterpret_cast<const float*>(kr + scales_at),
                                                               nb, acc + c, KB, pf);
      }
      FS::store(dots, FS::reduce_lanes(acc));
      for (int r = 0; r < RB && r0 + r < n_rows; ++r)
        for (int c = 0; c < KB; ++c) s[(r0 + r) * KT + j + c] = dots[r * KB + c];
    }
  }
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
