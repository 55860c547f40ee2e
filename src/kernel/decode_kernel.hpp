// The decode kernel: few query rows per KV head group over a long run of keys (token-by-token
// generation, speculative verification). Decode is memory-bound (every K/V byte is used by only
// a few rows), so unlike the prefill kernel it packs nothing:
//   - K and V rows are read where they are, in the caller's layout and strides, once per group;
//   - all query heads of a KV head group are one block of rows (GQA 32/8 reads K/V once, not 4x);
//   - Q·Kᵀ keeps several keys in flight: RB rows x KB keys of accumulators (RB * KB = one vector's
//     lanes), folded into one vector of dot products with a single horizontal reduction;
//   - one vector exp per score, one rescale of the output rows per key tile (not per key);
//   - P·V streams each V row once, for all rows of the block, with fp32 accumulators in registers.
// Masking goes through the same row intervals (problem/row_keys.hpp), tile classes and logits pass
// (kernel/logits.hpp) as prefill, and the same online-softmax state (kernel/online_softmax.hpp):
// a (row, tile) pair is skipped, full or mixed; mixed rows add only their allowed keys' V rows, so
// masked V (padding, NaN) never meets a weight.
//
// K and V may each be float32, float16 (converted in registers), or q8 / q4 blocks (a quantized KV
// cache): Q·Kᵀ then runs in integers on a per-block quantized query, and P·V runs in integers on
// int16 weights (SIMD128, AVX-512 VNNI) or dequantizes V in registers (kernel/quant_dot.hpp).
// The dtype is a run-time choice: one switch each for K and V (with_kv_type) gives the tile's
// Q·Kᵀ and P·V the dtype's row traits (kernel/quant.hpp), so one class serves every dtype pair.
//
// One call of run() computes rows [r0, r1) of group (b, hkv) over keys [k0, k1) (a split-K chunk)
// and leaves each row's softmax state and unnormalised output; kernel/run.hpp merges the chunks.
#pragma once

#include "base/arch_namespace.hpp"
#include "base/cache_line.hpp"
#include "base/compiler.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "problem/problem.hpp"
#include "kernel/logits.hpp"
#include "kernel/online_softmax.hpp"
#include "kernel/quant.hpp"
#include "kernel/quant_dot.hpp"
#include "kernel/simd.hpp"
#include "kernel/workspace.hpp"
#include "problem/row_keys.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// f, read back through a volatile: a call through it stays a call (where kCallsThroughOpaquePointers:
// the decode kernel's register blocks). The 16-bit dtypes' blocks have one caller each: inlined into
// the decode task's one large function, V8 kept their loops' constants and accumulators on the
// stack (SIMD128, Zen 3: the MHA bfloat16 step 5.4-5.5 ms inlined, 3.2-3.6 ms out of line).
template <class F>
MASKATTN_DISPATCH_INLINE inline F out_of_line(F f) {
  F volatile kept = f;
  return kept;
}

template <class Arch>
class DecodeAttention {
  using S = Simd<Arch>;
  using V = typename S::V;
  static constexpr int W = S::W;
  using QD = QuantDot<Arch>;
  using QRow = typename QD::Row;

 public:
  static constexpr int KT = 64;         // keys per tile (scores of a tile stay in L1)
  // Where software prefetch is not available (WebAssembly), K and V rows are read one after another,
  // each front to back: the hardware's prefetcher follows one stream. Measured in V8 (SIMD128, MHA
  // 32x2048x128 float32, Zen 3): Q·Kᵀ over 4 rows read side by side 5.8 ms, in order 2.2-2.9 ms;
  // P·V in 16-column passes over the tile 3.8 ms, row by row 2.1 ms (the read probe: 4.4 ms).
  static constexpr bool kInOrderRows = !kSoftwarePrefetch;
  static constexpr int kMaxRows = 32;   // rows per work item; larger groups become several items
  // Output columns per P·V pass: as many vectors as leave room for the V loads and a broadcast.
  static constexpr int NV = S::kRegisters >= 32 ? 8 : 4;
  // Accumulator registers of a P·V block (rows x column vectors): about half the register file.
  static constexpr int kPvAccumulators = S::kRegisters >= 32 ? 16 : S::kRegisters >= 16 ? 8 : 6;
  static constexpr int pv_columns_for(int rows) {
    int c = 1;
    while (c * 2 <= NV && c * 2 * rows <= kPvAccumulators) c *= 2;
    return c;
  }
  // Software prefetch distance: K and V rows this many keys ahead are requested while the
  // current ones are used, so enough cache-line misses are in flight (decode is bound by them).
  // Measured on Zen 5 at D = 128: 16 keys (8 KB of float32, 4 KB of float16) beat 4, 8 and 32;
  // long rows are capped at 16 KB ahead.
  static int64_t prefetch_keys(int64_t row_bytes) {
    return std::max<int64_t>(2, std::min<int64_t>(16, 16384 / std::max<int64_t>(1, row_bytes)));
  }

  explicit DecodeAttention(const Problem& p) : p_(p), logits_(p) {
    // Quantized V rows are whole blocks (zero-padded): P·V runs over all 32 columns of each block.
    dv_pad_ = is_quantized(p.kv.v_type) ? quant_blocks(p.Dv) * kQuantBlock : (p.Dv + W - 1) / W * W;
    k_row_bytes_ = stored_row_bytes(p.kv.k_type, p.D);
    v_row_bytes_ = stored_row_bytes(p.kv.v_type, p.Dv);
    v_stride_bytes_ = p.kv.vs.l * kv_unit_bytes(p.kv.v_type);
    nb_ = quant_blocks(p.D);
    q_pair_order_ = with_kv_type(p.kv.k_type, [](auto traits) {
      using KTraits = decltype(traits);
      if constexpr (KTraits::kQuantized) return QuantDotOf<QD, KTraits::kType>::kPairOrder;
      else return false;
    });
  }

  int64_t output_stride() const { return dv_pad_; }
  // Scratch: scores, element masks and bias of kMaxRows x KT, and kMaxRows output rows (oacc);
  // with quantized keys, the quantized query rows.
  void reserve(Workspace& ws) const {
    ws.reserve(KT, dv_pad_, kMaxRows, p_.Dv);
    if (is_quantized(p_.kv.k_type)) ws.reserve_query_blocks(query_scratch_bytes());
    if (copied_queries()) ws.reserve_query_blocks(kMaxRows * query_copy_stride() * int64_t(sizeof(float)));
  }

  // Row r of a group is query head hkv * group + r / Lq at position r % Lq.
  // states[r - r0] and o[(r - r0) * output_stride()] receive the row's partial result over keys
  // [k0, k1); weights rows (if asked, already -inf) receive the logits of the keys it computes.
  void run(Workspace& ws, int64_t b, int64_t hkv, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
           SoftmaxRow* states, float* o) {
    const int n_rows = int(r1 - r0);
    Row* rows = rows_;
    // reach: the end of every key any row attends in the whole sequence. Prefetches run up to it,
    // past the chunk's end: on one thread the next chunk of the head follows at once, and its first
    // tile is requested too (measured: no change from DRAM on this VM; kept as the right limit).
    int64_t first = k1, last = k0, reach = k0;
    for (int r = 0; r < n_rows; ++r) {
      Row& row = rows[r];
      row.h = hkv * p_.group + (r0 + r) / p_.Lq;
      row.i = (r0 + r) % p_.Lq;
      row.keys = row_keys(p_, b, row.i);
      row.q = p_.q + b * p_.qs.b + row.h * p_.qs.h + row.i * p_.qs.l;
      states[r] = SoftmaxRow{};
      std::fill(o + r * dv_pad_, o + (r + 1) * dv_pad_, 0.0f);
      if (row.keys.empty()) continue;
      first = std::min(first, std::max(k0, row.keys.first()));
      last = std::max(last, std::min(k1, row.keys.last_exclusive()));
      reach = std::max(reach, row.keys.last_exclusive());
    }
    if (first >= last) {
      ws.stats.tiles_skipped += (k1 - k0 + KT - 1) / KT;
      return;
    }
    if (is_quantized(p_.kv.k_type)) quantize_queries(ws, rows, n_rows, b, hkv, r0);
    if (copied_queries()) copy_queries(ws, rows, n_rows);
    const int64_t t_begin = (first - k0) / KT, t_end = (last - k0 + KT - 1) / KT;
    ws.stats.tiles_skipped += (k1 - k0 + KT - 1) / KT - (t_end - t_begin);
    // Tiles of KT keys on the chunk's grid, cut where rows stop being consecutive in memory (a
    // ring's wrap, a page's end: KeySource::contiguous_keys), so each tile's rows are one run; with
    // pages a multiple of KT (and chunks aligned), no tile is ever cut.
    const int64_t j_end = std::min(k1, k0 + t_end * KT);
    for (int64_t j = k0 + t_begin * KT; j < j_end;) {
      const int64_t run = p_.kv.contiguous_keys(j);
      const int64_t n = std::min({KT - (j - k0) % KT, j_end - j, run});
      if (n == run && j + n < std::min(j_end, last)) {
        // The run ends with this tile (a page's end): the next rows are elsewhere, where neither the
        // tile's own prefetches nor the hardware's stream reach. Request their first rows now (only
        // keys some row attends: the sequence holds them, so their page exists).
        const int64_t ahead = std::min({prefetch_keys(k_row_bytes_), std::min(j_end, last) - j - n, p_.kv.contiguous_keys(j + n)});
        prefetch_bytes(p_.kv.key_row(b, hkv, j + n), ahead * k_row_bytes_);
        prefetch_bytes(p_.kv.value_row(b, hkv, j + n), ahead * v_row_bytes_);
      }
      key_tile(ws, b, hkv, rows, n_rows, j, n, std::min(reach, j + run), states, o);
      j += n;
    }
  }

 private:
  struct Row {
    int64_t h = 0, i = 0;
    RowKeys keys;
    const float* q = nullptr;
    QRow qq;  // the row quantized per block (quantized keys)
  };

  const Problem& p_;
  Logits<Arch> logits_;
  int64_t dv_pad_ = 0, k_row_bytes_ = 0, v_row_bytes_ = 0, v_stride_bytes_ = 0, nb_ = 0;
  bool q_pair_order_ = false;  // the quantized queries' layout the keys' dot product reads
  // Per-item row table and per-tile lists (indices into the active list).
  Row rows_[kMaxRows];
  int active_[kMaxRows], full_[kMaxRows];
  TileClass class_[kMaxRows];
  const float* qrows_[kMaxRows];
  const QRow* qquant_[kMaxRows];

  // [kMaxRows] prepared rows, then D floats (a rotated row), one q8 row, and the kMaxRows QRow
  // views of the last rows prepared (reused by the next chunk of the same rows: quantize_queries).
  // On a cache line, as the workspace's arrays start on one (base/cache_line.hpp).
  int64_t saved_rows_offset() const {
    const int64_t end = kMaxRows * QRow::bytes(nb_) + 4 * p_.D + stored_row_bytes(KVType::q8, p_.D);
    return (end + int64_t(kCacheLine) - 1) / int64_t(kCacheLine) * int64_t(kCacheLine);
  }
  int64_t query_scratch_bytes() const { return saved_rows_offset() + kMaxRows * int64_t(sizeof(QRow)); }
  QRow* saved_query_rows(Workspace& ws) const {
    return reinterpret_cast<QRow*>(ws.query_blocks.data() + saved_rows_offset());
  }
  // Each row's query quantized like a q8 key (rotated first when the keys are).
  // A call's chunks of one row block run one after another on a worker (run_decode): the rows the
  // last chunk prepared in this workspace, in this call, are taken as they are (measured: preparing
  // them per 512-key chunk was 15% of the GQA q4 step from L2).
  void quantize_queries(Workspace& ws, Row* rows, int n_rows, int64_t b, int64_t hkv, int64_t r0) const {
    static_assert(std::is_trivially_copyable_v<QRow>, "prepared rows are pointers into ws.query_blocks");
    QRow* saved = saved_query_rows(ws);
    if (ws.call != 0 && ws.queries_call == ws.call && ws.queries_b == b && ws.queries_hkv == hkv && ws.queries_r0 == r0) {
      for (int r = 0; r < n_rows; ++r) rows[r].qq = saved[r];
      return;
    }
    uint8_t* base = ws.query_blocks.data();
    float* rotated = reinterpret_cast<float*>(base + kMaxRows * QRow::bytes(nb_));
    uint8_t* q8 = reinterpret_cast<uint8_t*>(rotated + p_.D);
    for (int r = 0; r < n_rows; ++r) {
      if (rows[r].keys.empty()) continue;
      const float* q = rows[r].q;
      if (p_.kv.keys_rotated) {
        std::memcpy(rotated, q, size_t(p_.D) * 4);
        rotate(rotated, p_.D);
        q = rotated;
      }
      quantize_row(KVType::q8, q, p_.D, q8);
      rows[r].qq = QRow::prepare(q8, p_.D, nb_, QD::kQ8Offset, base + r * QRow::bytes(nb_),
                                 q_pair_order_);
    }
    for (int r = 0; r < n_rows; ++r) saved[r] = rows[r].qq;
    ws.queries_call = ws.call;
    ws.queries_b = b;
    ws.queries_hkv = hkv;
    ws.queries_r0 = r0;
  }

  // Float keys read with software prefetch meet a copy of each query row on a cache line (a row 16
  // bytes off one had half its loads straddle two lines: GQA float32 in L3 49 -> 45 ns per key);
  // bfloat16 keys read in pairs (Simd::kBf16Pairs) meet it in their order (load_pair_order on each
  // whole block of 2W values). Per chunk of keys (up to 512), D floats per row.
  template <class T>
  static constexpr bool kPairRows = S::kBf16Pairs && !kInOrderRows && std::is_same_v<T, Bf16>;
  int64_t query_copy_stride() const { return (p_.D + 15) / 16 * 16; }
  bool copied_queries() const { return !kInOrderRows && !is_quantized(p_.kv.k_type); }
  void copy_queries(Workspace& ws, Row* rows, int n_rows) const {
    const bool pairs = kPairRows<Bf16> && p_.kv.k_type == KVType::bfloat16;
    float* copy = reinterpret_cast<float*>(ws.query_blocks.data());  // on a line (base/cache_line.hpp)
    const int64_t D = p_.D, whole = pairs ? D / (2 * W) * (2 * W) : 0;
    for (int r = 0; r < n_rows; ++r, copy += query_copy_stride()) {
      if (rows[r].keys.empty()) continue;
      const float* q = rows[r].q;
      if constexpr (kPairRows<Bf16>)
        for (int64_t d = 0; d < whole; d += 2 * W) {
          V pair[2];
          S::load_pair_order(q + d, pair);
          S::store(copy + d, pair[0]);
          S::store(copy + d + W, pair[1]);
        }
      std::copy(q + whole, q + D, copy + whole);
      rows[r].q = copy;
    }
  }

  void key_tile(Workspace& ws, int64_t b, int64_t hkv, const Row* rows, int n_rows, int64_t j0, int64_t n,
                int64_t k_end, SoftmaxRow* states, float* o) {
    const int kt = int((n + W - 1) / W * W);
    // Classify each row's pairs with this tile; rows that attend something join the active list.
    int32_t seg_lo = 0, seg_hi = 0;
    if (p_.query_segments) {
      const int32_t* seg = p_.key_segments + b * p_.Lk + j0;
      seg_lo = seg_hi = seg[0];
      for (int64_t j = 1; j < n; ++j) { seg_lo = std::min(seg_lo, seg[j]); seg_hi = std::max(seg_hi, seg[j]); }
    }
    int* active = active_;
    TileClass* cls = class_;
    int n_active = 0, n_full = 0;
    for (int r = 0; r < n_rows; ++r) {
      if (rows[r].keys.empty()) continue;
      TileClass c = logits_.classify_row(b, rows[r].h, rows[r].i, rows[r].keys, j0, n, seg_lo, seg_hi);
      if (c == TileClass::skip) continue;
      if (c == TileClass::full && n < kt) c = TileClass::mixed;  // lanes past the last key
      cls[n_active] = c;
      n_full += c == TileClass::full;
      active[n_active++] = r;
    }
    if (n_active == 0) {
      ++ws.stats.tiles_skipped;
      return;
    }
    (n_full == n_active ? ws.stats.tiles_full : ws.stats.tiles_mixed) += 1;

    // Scores of the active rows, [n_active][KT].
    float* s = ws.scores.data();
    // A tile never crosses a ring's wrap or a page's end (run() cuts tiles there): rows are contiguous.
    const void* k = p_.kv.key_row(b, hkv, j0);
    const int64_t ahead = k_end - j0;  // keys from j0 that prefetches may request (run(): reach)
    // The tile's V rows, requested while its Q·Kᵀ runs where P·V will read them in column passes
    // (v_in_passes), else null.
    const auto* v = static_cast<const uint8_t*>(v_in_passes(n_active) ? p_.kv.value_row(b, hkv, j0) : nullptr);
    // Quantized keys meet the rows' quantized queries, float keys the float ones; the dtype itself
    // is resolved where the register blocks are called (one copy of the row setup per kind).
    if (is_quantized(p_.kv.k_type)) {
      const QRow** qq = qquant_;
      for (int a = 0; a < n_active; ++a) qq[a] = &rows[active[a]].qq;
      qk_rows_quant(qq, n_active, static_cast<const uint8_t*>(k), int(n), kt, ahead, v, s);
    } else {
      const float** qrows = qrows_;
      for (int a = 0; a < n_active; ++a) qrows[a] = rows[active[a]].q;
      with_kv_type(p_.kv.k_type, [&](auto traits) MASKATTN_DISPATCH_INLINE {
        using KTraits = decltype(traits);
        if constexpr (!KTraits::kQuantized)
          qk_rows(qrows, n_active, static_cast<const typename KTraits::Elem*>(k), int(n), kt, ahead, v, s);
      });
    }

    // Logits, masks and the online-softmax update, row by row.
    const bool elementwise_rules = p_.has_elementwise_rules();
    for (int a = 0; a < n_active; ++a) {
      const Row& row = rows[active[a]];
      float* srow = s + a * KT;
      const bool masked = cls[a] == TileClass::mixed;
      const bool elementwise = masked && elementwise_rules;
      float* valid = ws.valid.data() + a * KT;
      float* bias_tile = ws.bias_tile.data() + a * KT;
      if (elementwise) logits_.element_row(b, row.h, row.i, j0, n, kt, valid, bias_tile);
      const float* full_bias = (p_.bias && !elementwise) ? mask_row(p_.bias, b, row.h, row.i) : nullptr;
      SoftmaxRow& st = states[active[a]];
      // Lanes past the tile's last key (a chunk may end before Lk: a ring's wrap) are masked by
      // clipping the row's intervals to the tile.
      RowKeys keys = row.keys;
      if (n < kt) {
        keys.hi = std::min(keys.hi, j0 + n);
        keys.prefix_end = std::min(keys.prefix_end, j0 + n);
      }
      const float tile_max = logits_.row(srow, kt, j0, b, row.h, row.i, keys, masked,
                                         elementwise ? valid : nullptr, elementwise && p_.bias ? bias_tile : nullptr,
                                         full_bias, st.has_key);
      if (!masked) st.has_key = true;
      if (p_.weights)
        std::memcpy(p_.weights + ((b * p_.Hq + row.h) * p_.Lq + row.i) * p_.Lk + j0, srow, sizeof(float) * n);
      if (!OnlineSoftmax<Arch>::update(st, srow, kt, tile_max, o + active[a] * dv_pad_, dv_pad_))
        cls[a] = TileClass::skip;  // nothing allowed after all (e.g. bias -inf): no V to add
    }

    // P·V: full rows together in register blocks; mixed rows over their allowed keys only.
    with_kv_type(p_.kv.v_type, [&](auto traits) MASKATTN_DISPATCH_INLINE {
      using VTraits = decltype(traits);
      const auto* vr = static_cast<const typename VTraits::Elem*>(p_.kv.value_row(b, hkv, j0));
      if constexpr (VTraits::kQuantized) pv_tile(ws, rows, s, cls, n_active, elementwise_rules, j0, n, ahead, QuantRows<VTraits>{vr}, o);
      else pv_tile(ws, rows, s, cls, n_active, elementwise_rules, j0, n, ahead, vr, o);
    });
  }

  // Whether P·V reads a tile's V rows in column passes, natively: quantized V, and 16-bit V for two
  // or more rows (pv_rows). The first pass reads part of each row, faster than its requests 16 keys
  // ahead come from DRAM, so Q·Kᵀ requests the tile's V rows as it goes (AVX2, Zen 3, from DRAM, ns
  // per key and KV head: GQA float16 55 -> 43, bfloat16 57 -> 44, MHA q8 28.5 -> 26.5; in L3 3-6%
  // slower, the requests being instructions). Float32 V and one row's 16-bit V are read in order,
  // where requesting them too measured no faster from DRAM (GQA float32 74 either way) and 13-33%
  // slower in L3. A P·V in integers over the whole tile (QD::kPvTile: AVX-512 VNNI) requests its V
  // rows a tile ahead itself.
  bool v_in_passes(int n_rows) const {
    return kSoftwarePrefetch && (is_quantized(p_.kv.v_type) ? !QD::kPvTile : p_.kv.v_type != KVType::f32 && n_rows >= 2);
  }

  // Quantized V rows of a tile (the type picks the P·V path; Traits: the dtype's RowTraits).
  template <class Traits>
  struct QuantRows {
    using T = Traits;
    const uint8_t* p;
  };

  template <class VRows>
  MASKATTN_DISPATCH_INLINE void pv_tile(Workspace& ws, const Row* rows, const float* s, const TileClass* cls, int n_active, bool elementwise_rules,
               int64_t j0, int64_t n, int64_t ahead, VRows v, float* o) {
    const int* active = active_;
    int* full = full_;
    int nf = 0;
    for (int a = 0; a < n_active; ++a) {
      if (cls[a] == TileClass::full) full[nf++] = a;
      else if (cls[a] == TileClass::mixed) pv_masked_row(rows[active[a]], s + a * KT, ws.valid.data() + a * KT,
                                                        elementwise_rules, j0, n, v, o + active[a] * dv_pad_);
    }
    for (int f = 0; f < nf;) {
      const int left = nf - f;
      if (left >= 4) { pv_rows_call<4>(full + f, active, s, v, int(n), ahead, o); f += 4; }
      else if (left >= 2) { pv_rows_call<2>(full + f, active, s, v, int(n), ahead, o); f += 2; }
      else { pv_rows_call<1>(full + f, active, s, v, int(n), ahead, o); f += 1; }
    }
  }

  // pv_rows through out_of_line (a static function: pv_rows has two overloads to take the address of).
  template <int R, class VRows>
  MASKATTN_DISPATCH_INLINE void pv_rows_call(const int* which, const int* active, const float* s, VRows v, int n,
                                             int64_t ahead, float* o) const {
    if constexpr (kCallsThroughOpaquePointers) out_of_line(&pv_rows_entry<R, VRows>)(this, which, active, s, v, n, ahead, o);
    else pv_rows<R>(which, active, s, v, n, ahead, o);
  }
  template <int R, class VRows>
  static void pv_rows_entry(const DecodeAttention* self, const int* which, const int* active, const float* s, VRows v,
                            int n, int64_t ahead, float* o) {
    self->pv_rows<R>(which, active, s, v, n, ahead, o);
  }

  // ---------------------------------------------------------------- Q·Kᵀ

  // s[a][j] = q_a · k_j for the n keys of the tile (lanes [n, kt) are computed from a repeated key
  // and masked later by the intervals). T: float, uint16_t halves or Bf16. v: the tile's V rows to
  // request as it goes (v_in_passes), or null.
  template <class T>
  void qk_rows(const float* const* qrows, int n_rows, const T* k, int n, int kt, int64_t ahead, const uint8_t* v,
               float* s) const {
    if constexpr (W == 1) {
      qk_block_call<1>(qrows, n_rows, k, n, kt, ahead, v, s);
    } else {
      // Natively, 2 rows x W / 2 keys on 4 lanes, and on 8 for 16-bit keys, read again from L1 by
      // the next rows (AVX2, Zen 3, GQA in L3: bfloat16 40 -> 37 ns per key); float32 keys on 8 at
      // 4 rows x 2 keys, which from DRAM ran 71 ns per key to 2 x 4's 80 (D = 192: 91 to 122). In
      // order, 4 rows fit 4 lanes' registers: each K row is read, and converted, once for 4 rows.
      if (n_rows == 1) qk_block_call<1>(qrows, n_rows, k, n, kt, ahead, v, s);
      else if (n_rows == 2 || (!kInOrderRows && (W == 4 || (W == 8 && !std::is_same_v<T, float>)))) qk_block_call<2>(qrows, n_rows, k, n, kt, ahead, v, s);
      else if (n_rows <= 4) qk_block_call<4>(qrows, n_rows, k, n, kt, ahead, v, s);
      else qk_block_call<W >= 16 ? 8 : 4>(qrows, n_rows, k, n, kt, ahead, v, s);
    }
  }

  template <int RB, class T>
  MASKATTN_DISPATCH_INLINE void qk_block_call(const float* const* qrows, int n_rows, const T* k, int n, int kt,
                                              int64_t ahead, const uint8_t* v, float* s) const {
    if constexpr (kCallsThroughOpaquePointers) (this->*out_of_line(&DecodeAttention::qk_block<RB, T>))(qrows, n_rows, k, n, kt, ahead, v, s);
    else qk_block<RB>(qrows, n_rows, k, n, kt, ahead, v, s);
  }

  template <int RB, class T>
  MASKATTN_NOINLINE_WASM void qk_block(const float* const* qrows, int n_rows, const T* k, int n, int kt,
                                  int64_t ahead, const uint8_t* v, float* s) const {
    constexpr int KB = W / RB;
    static_assert(RB * KB == W, "one accumulator per lane of the reduced vector");
    const int64_t D = p_.D, d_vec = D / W * W, ks = p_.kv.ks.l, pf = prefetch_keys(k_row_bytes_);
    alignas(64) float dots[W];
    for (int j = 0; j < kt; j += KB) {
      const T* kr[KB];
      for (int c = 0; c < KB; ++c) kr[c] = k + std::min(j + c, n - 1) * ks;
      for (int r0 = 0; r0 < n_rows; r0 += RB) {
        const float* q[RB];
        for (int r = 0; r < RB; ++r) q[r] = qrows[std::min(r0 + r, n_rows - 1)];
        if (r0 == 0)
          for (int c = 0; c < KB; ++c) {
            if (j + c + pf < ahead) prefetch_bytes(k + (j + c + pf) * ks, k_row_bytes_);
            if (v && j + c < n) prefetch_bytes(v + (j + c) * v_stride_bytes_, v_row_bytes_);
          }
        V acc[W];
        if constexpr (kInOrderRows) {
          for (int c = 0; c < KB; ++c) dot_in_order<RB, KB>(q, kr[c], d_vec, acc + c);
        } else {
          for (int x = 0; x < W; ++x) acc[x] = S::splat(0.0f);
          int64_t d = 0;
          if constexpr (kPairRows<T>) {
            // q[r] is in pair order here (copy_queries). Up to 2 keys' pairs are loaded
            // before the rows (each row's query read once for them); more keys go one at a time,
            // each row's query kept in registers across them. (AVX2, Zen 3, in L3: GQA, 4 rows x
            // 2 keys, one key at a time 43 ns per key, two 39; MHA, 1 row x 8 keys, two at a time
            // 19 ns, one 18.)
            constexpr int KP = KB <= 2 ? KB : 1;
            for (; d + 2 * W <= d_vec; d += 2 * W)
              for (int c0 = 0; c0 < KB; c0 += KP) {
                V kv[KP][2];
                for (int c = 0; c < KP; ++c) S::load_bf16_pair(kr[c0 + c] + d, kv[c]);
                for (int r = 0; r < RB; ++r) {
                  const V qa = S::load(q[r] + d), qb = S::load(q[r] + d + W);
                  for (int c = 0; c < KP; ++c) acc[r * KB + c0 + c] = S::fma(qa, kv[c][0], acc[r * KB + c0 + c]);
                  for (int c = 0; c < KP; ++c) acc[r * KB + c0 + c] = S::fma(qb, kv[c][1], acc[r * KB + c0 + c]);
                }
              }
          }
          for (; d < d_vec; d += W) {
            V kv[KB];
            for (int c = 0; c < KB; ++c) kv[c] = S::load(kr[c] + d);
            for (int r = 0; r < RB; ++r) {
              const V qv = S::load(q[r] + d);
              for (int c = 0; c < KB; ++c) acc[r * KB + c] = S::fma(qv, kv[c], acc[r * KB + c]);
            }
          }
        }
        S::store(dots, S::reduce_lanes(acc));  // dots[r * KB + c] = q_r · k_c
        if (d_vec < D)
          for (int r = 0; r < RB; ++r)
            for (int c = 0; c < KB; ++c)
              for (int64_t d = d_vec; d < D; ++d) dots[r * KB + c] += q[r][d] * element(kr[c][d]);
        for (int r = 0; r < RB && r0 + r < n_rows; ++r)
          for (int c = 0; c < KB; ++c) s[(r0 + r) * KT + j + c] = dots[r * KB + c];
      }
    }
  }

  // One key row against RB query rows, read front to back (in-order mode; kernel/decode_in_order.hpp).
  template <int RB, int KB, class T>
  MASKATTN_DISPATCH_INLINE void dot_in_order(const float* const* q, const T* kr, int64_t d_vec, V* acc) const;
  template <int RB, int KB, class T>
  MASKATTN_DISPATCH_INLINE bool dot_in_order8(const float* const* q, const T* kr, int64_t d_vec, V* acc) const;

  // Quantized keys: the same register blocking over QuantDot's float lanes (L), integer dots per block.
  using FS = Simd<typename QD::FArch>;
  using FV = typename FS::V;
  static constexpr int L = FS::W;

  // Q·Kᵀ over quantized keys (kernel/decode_qk_quant.hpp): rows in register blocks, QuantDot's
  // integer dot products per block; v as qk_rows'.
  void qk_rows_quant(const QRow* const* qq, int n_rows, const uint8_t* k, int n, int kt, int64_t ahead,
                     const uint8_t* v, float* s) const;
  MASKATTN_PREFETCH_INLINE int64_t request_keys(const uint8_t* k, int j, int count, int64_t ahead, int64_t ks) const;
  template <int RB, class KTraits>
  MASKATTN_NOINLINE_WASM void qk_block_quant(const QRow* const* qq, int n_rows, const uint8_t* k, int n, int kt,
                                             int64_t ahead, const uint8_t* v, float* s) const;
  template <int RB, class KTraits, int NB>
  MASKATTN_DISPATCH_INLINE void qk_block_quant_nb(const QRow* const* qq, int n_rows, const uint8_t* k, int n, int kt,
                                                  int64_t ahead, const uint8_t* v, float* s) const;
  template <int RB, class KTraits, int NB, int Form>
  MASKATTN_NOINLINE_WASM void qk_rows_quant_form(const QRow* const* qq, int n_rows, const uint8_t* k, int n, int kt,
                                                 int64_t ahead, const uint8_t* v, float* s) const;
  template <int RB, class KTraits, int NB, int Form>
  MASKATTN_DISPATCH_INLINE void qk_rows_quant(const QRow* const* qq, int n_rows, const uint8_t* k, int n, int kt,
                                              int64_t ahead, const uint8_t* v, float* s) const;

  // ---------------------------------------------------------------- P·V

  // o[row] += sum_j p[row][j] v_j over the n keys of the tile, for R rows (indices into the active
  // list) at once: each V row is loaded once per pass and used by every row.
  template <int R, class T>
  MASKATTN_NOINLINE_WASM void pv_rows(const int* which, const int* active, const float* s, const T* v, int n,
                                 int64_t ahead, float* o) const;

  // Each V row read once, front to back, into the output rows (in-order mode; kernel/decode_in_order.hpp).
  template <int R, class T>
  void pv_in_order(const float* const* prow, float* const* orow, const T* v, int64_t vs, int n, int64_t dv_vec,
                   int64_t ahead) const;
  template <int R, int K, class T>
  void pv_keys8(const float* const* prow, float* const* orow, const T* vr, int64_t vs, int j, int64_t dv_vec) const;

  // `ahead` > 0: the first pass over the tile also prefetches V rows that far ahead.
  template <int R, int C, class T>
  void pv_columns(const float* const* prow, float* const* orow, const T* v, int64_t vs, int n, int64_t c0,
                  int64_t ahead) const;

  // One mixed row: only the keys its intervals and element-wise rules allow are read.
  template <class T>
  void pv_masked_row(const Row& row, const float* p, const float* valid, bool elementwise, int64_t j0, int64_t n,
                     const T* v, float* o) const;

  // Quantized V: columns in groups of 16 (one 16-byte load of q8 values, or the low or high
  // nibbles of a q4 block's 16 bytes), NG groups per pass; each group is 16 / W vectors.
  static constexpr int kGroupVectors = 16 / W;
  static constexpr int pv_groups_for(int rows) {
    int g = 1;
    while (g * 2 * kGroupVectors * rows <= kPvAccumulators && g * 2 * kGroupVectors <= NV) g *= 2;
    return g;
  }

  template <int R, class QRows>
  MASKATTN_NOINLINE_WASM void pv_rows(const int* which, const int* active, const float* s, QRows v, int n, int64_t ahead,
                                 float* o) const {
    const float* prow[R];
    float* orow[R];
    for (int r = 0; r < R; ++r) {
      prow[r] = s + which[r] * KT;
      orow[r] = o + active[which[r]] * dv_pad_;
    }
    if constexpr (QD::kPvTile) {
      using Dot = QuantDotOf<QD, QRows::T::kType>;
      if (Dot::template pv_tile<R>(prow, nullptr, orow, v.p, p_.kv.vs.l, n, quant_blocks(p_.Dv), ahead, v_row_bytes_)) return;
      // A non-finite scale or weight in the tile: the float path below carries the NaN.
    } else if constexpr (QD::kIntegerValues) {  // rows in pairs (a pair's accumulators fill the registers)
      auto all = [](int, int) { return true; };
      for (int r = 0; r < R; r += 2) {
        const int m = std::min(2, R - r);
        if (m == 2 ? pv_integer<2>(prow + r, orow + r, v, n, all) : pv_integer<1>(prow + r, orow + r, v, n, all)) continue;
        // A non-finite scale in the tile (NaN or infinity in V): pv_integer wrote nothing, and the
        // float path carries the NaN for these rows.
        constexpr int G1 = pv_groups_for(1);
        for (int x = r; x < r + m; ++x)
          for (int64_t c0 = 0; c0 < dv_pad_; c0 += G1 * 16)
            pv_quant_groups<1, G1>(prow + x, orow + x, v, n, c0, 0, [](int) { return true; });
      }
      return;
    }
    constexpr int G = pv_groups_for(R);
    for (int64_t c0 = 0; c0 < dv_pad_; c0 += G * 16)
      pv_quant_groups<R, G>(prow, orow, v, n, c0, c0 == 0 ? ahead : 0, [](int) { return true; });
  }

  template <class QRows>
  void pv_masked_row(const Row& row, const float* p, const float* valid, bool elementwise, int64_t j0, int64_t n,
                     QRows v, float* o) const {
    const RowKeys& keys = row.keys;
    auto allowed = [&](int j) { return keys.allows(j0 + j) && (!elementwise || valid[j] != 0.0f); };
    const float* prow[1] = {p};
    float* orow[1] = {o};
    if constexpr (QD::kPvTile) {
      uint64_t use = 0;
      for (int j = 0; j < int(n); ++j) use |= uint64_t(allowed(j)) << j;
      if (QuantDotOf<QD, QRows::T::kType>::template pv_tile<1>(prow, &use, orow, v.p, p_.kv.vs.l, int(n),
                                                                quant_blocks(p_.Dv), 0, v_row_bytes_))
        return;
    } else if constexpr (QD::kIntegerValues) {
      if (pv_integer<1>(prow, orow, v, int(n), [&](int, int j) { return allowed(j); })) return;
    }
    constexpr int G = pv_groups_for(1);
    for (int64_t c0 = 0; c0 < dv_pad_; c0 += G * 16) pv_quant_groups<1, G>(prow, orow, v, int(n), c0, 0, allowed);
  }

  // P·V of quantized V (kernel/decode_pv_quant.hpp): in integers where QuantDot has them, else
  // dequantized in registers, in passes of 16-column groups.
  static constexpr int kIntegerMaxBlocks = 16;
  template <int R, class QRows, class Use>
  bool pv_integer(const float* const* prow, float* const* orow, QRows v, int n, Use&& use) const;
  template <int R, int NGF, class QRows, class Use>
  void pv_fixed(const float* const* prow, float* const* orow, QRows v, int n, int64_t c0, int64_t ahead, Use&& use) const;
  template <int R, int NG, class QRows, class Use>
  MASKATTN_NOINLINE_X86 void pv_quant_groups(const float* const* prow, float* const* orow, QRows v, int n, int64_t c0,
                                             int64_t ahead, Use&& use) const;
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail

#include "kernel/decode_in_order.hpp"  // K and V rows read in order, defined out of the class
#include "kernel/decode_pv_rows.hpp"  // P·V of float32 and 16-bit V, defined out of the class
#include "kernel/decode_pv_quant.hpp"  // P·V of quantized V, defined out of the class
#include "kernel/decode_qk_quant.hpp"  // Q·Kᵀ over quantized keys, defined out of the class
