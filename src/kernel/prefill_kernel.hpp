// The prefill kernel (many query rows per KV head group), written once against Simd<Arch>
// (kernel/simd.hpp) and instantiated per architecture by the small files in dispatch/. The decode
// kernel (few rows, long keys) is beside it in decode_kernel.hpp; kernel/run.hpp picks one.
//
// Work is cut into blocks of MR query rows x KT keys ("tiles"); NB blocks form a super-block that
// walks the key tiles together, so each packed tile is reused from cache. For each (b, kv head)
// K and V are packed once, lazily, tile by tile (tiles no query may attend are never read): K
// transposed into panels [d][PANEL] for the register-blocked Q·Kᵀ micro-tile, V panel-major
// [Dv / PANEL][KT][PANEL] for the P·V micro-tile. Each block walks only the key tiles its rows'
// intervals reach, and classifies each:
//   skip   - every pair masked: nothing computed, K/V not touched;
//   full   - every pair allowed: no per-element mask work, register-blocked P·V;
//   mixed  - an interval edge or an element-wise rule cuts it: masks applied per element; P·V is
//            register-blocked when the tile's V is finite (masked weights are exactly 0), else
//            row by row over each row's allowed keys only, so masked NaN/inf V never meets a weight.
// Softmax is online (kernel/online_softmax.hpp, shared with the decode kernel); the logits pass and
// the element-wise masks are kernel/logits.hpp. Whether a row is fully masked comes from the masks
// (has_key), never from scores.
#pragma once

#include "kernel/arch_namespace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/problem.hpp"
#include "kernel/logits.hpp"
#include "kernel/online_softmax.hpp"
#include "kernel/quant.hpp"
#include "kernel/simd.hpp"
#include "kernel/workspace.hpp"
#include "mask/row_keys.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {


// Calls f(first, integral_constant<NC>) over `count` items in chunks of NC, then 1 at a time.
template <int NC, class F>
inline void for_vector_chunks(int count, F&& f) {
  int c = 0;
  for (; c + NC <= count; c += NC) f(c, std::integral_constant<int, NC>{});
  for (; c < count; ++c) f(c, std::integral_constant<int, 1>{});
}

template <class Arch>
class PrefillAttention {
  using S = Simd<Arch>;
  using V = typename S::V;
  using M = typename S::M;
  static constexpr int W = S::W;

 public:
  // Register blocking: MR query rows x NV vectors of accumulators fill about 3/4 of the register
  // file, leaving room for the NV operand loads and a broadcast. Measured choices:
  //   x86 (16 registers, 32 for AVX-512): 6 x 2 (12 x 2), 64-key tiles.
  //   WebAssembly (12 usable: V8 keeps an XMM register and mul+add needs a temporary): 2 x 4 with
  //   128-key tiles; in Node 20, 3x2, 4x2, 3x3, 2x3, 1x8 and 64-key tiles were 4-40% slower.
  //   Scalar: 4 x 4.
  //   AArch64 NEON (32 registers, 4 lanes): 8 x 2. 12 x 2 fits on paper (24 + 2 loads + 1), but
  //   g++ 12 then keeps the broadcasts of fmla-by-element in vector registers too and stores all
  //   24 accumulators to the stack on every step of the Q·Kᵀ loop (12 stp per 24 fmla) and spills
  //   in P·V; 16 accumulators compile clean (objdump). Not yet measured on ARM hardware.
  static constexpr bool kWasmTuning = S::kRegisters < 16;
  static constexpr bool kNeonTuning = S::kRegisters >= 32 && W == 4;
  static constexpr int MR = kNeonTuning ? 8 : S::kRegisters >= 32 ? 12 : W == 1 ? 4 : kWasmTuning ? 2 : 6;
  static constexpr int NV = W == 1 ? 4 : kWasmTuning ? 4 : 2;
  static constexpr int PANEL = NV * W;            // keys per packed K panel
  static constexpr int KT = kWasmTuning ? 128 : 64;  // keys per tile
  // Register blocks per query super-block: each packed K/V tile is used by NB * MR rows while it
  // is in L1/L2, instead of streaming all of K and V from L3 for every MR rows.
  static constexpr int NB = 4;
  static_assert(KT % PANEL == 0, "a key tile holds whole panels");
  // ws.packed[t]: 0 = not packed yet for this (b, kv head), else packed, and whether V is finite.
  static constexpr uint8_t kPacked = 1, kPackedFinite = 2;

  explicit PrefillAttention(const Problem& p) : p_(p), logits_(p) {
    // Value rows padded to whole NV-vector panels: the P·V micro-tile needs no tail case.
    dv_vectors_ = int((p.Dv + PANEL - 1) / PANEL) * NV;
    dv_pad_ = int64_t(dv_vectors_) * W;
    tiles_ = (p.Lk + KT - 1) / KT;
    elementwise_ = p.has_elementwise_rules();
  }

  // Runs query super-blocks [block_begin, block_end) of every query head of kv head `hkv`, batch `b`.
  void run(Workspace& ws, int64_t b, int64_t hkv, int64_t block_begin, int64_t block_end) {
    prepare(ws, b, hkv);
    for (int64_t h = hkv * p_.group; h < (hkv + 1) * p_.group; ++h)
      for (int64_t blk = block_begin; blk < block_end; ++blk) query_superblock(ws, b, h, blk * NB * MR);
  }

  static int64_t query_blocks(int64_t Lq) { return (Lq + NB * MR - 1) / (NB * MR); }
  void reserve(Workspace& ws) const { ws.reserve(tiles_, KT, p_.D, dv_pad_, NB * MR, p_.Dv); }
  int64_t padded_dv() const { return dv_pad_; }

  // The two micro-tiles alone, for bench/microkernel: `reps` passes over the first key tile, all
  // of it in L1 (ws.qblock [D][MR], ws.kpack [KT / PANEL][D][PANEL] and ws.vpack [Dv_pad / PANEL]
  // [KT][PANEL] as the caller filled them after reserve()): Q·Kᵀ of MR rows x KT keys into
  // ws.scores, then P·V of those scores into ws.oacc. No softmax and no masks: these loops bound
  // the kernel's share of the FMA peak.
  void microtiles_only(Workspace& ws, int64_t reps, bool qk, bool pv) const {
    for (int64_t n = 0; n < reps; ++n) {
      if (qk)
        for (int c = 0; c < KT / PANEL; ++c)
          qk_panel<MR>(ws.qblock.data(), ws.kpack.data() + c * p_.D * PANEL, ws.scores.data() + c * PANEL);
      if (pv) pv_block<MR>(ws.oacc.data(), ws.scores.data(), ws.vpack.data(), KT);
    }
  }

 private:
  const Problem& p_;
  Logits<Arch> logits_;
  int dv_vectors_ = 0;
  int64_t dv_pad_ = 0;
  int64_t tiles_ = 0;
  bool elementwise_ = false;

  // Per-block row state.
  struct Rows {
    RowKeys keys[MR];
    bool active[MR];   // a real row (i < Lq) with at least one key allowed by the intervals
    SoftmaxRow state[MR];  // running max, sum, has_key (see kernel/online_softmax.hpp)
    int64_t i0 = 0;
    int n_active = 0;
    int n_rows = 0;  // real rows (i < Lq): the micro-tiles compute only row_tier(n_rows) rows
    int64_t key_end = 0;  // no active row attends a key at or past it: columns beyond are not computed
  };

  // ---------------------------------------------------------------- packing (per b, kv head)

  void prepare(Workspace& ws, int64_t b, int64_t hkv) {
    std::fill(ws.packed.begin(), ws.packed.begin() + tiles_, uint8_t(0));
    ws.b = b;
    ws.hkv = hkv;
    ws.mean_v_ready = false;
    if (p_.key_segments) {
      const int32_t* seg = p_.key_segments + b * p_.Lk;
      for (int64_t t = 0; t < tiles_; ++t) {
        const int64_t j0 = t * KT, j1 = std::min(j0 + KT, p_.Lk);
        int32_t lo = seg[j0], hi = seg[j0];
        for (int64_t j = j0 + 1; j < j1; ++j) { lo = std::min(lo, seg[j]); hi = std::max(hi, seg[j]); }
        ws.seg_min[t] = lo;
        ws.seg_max[t] = hi;
      }
    }
  }

  // Keys of tile t actually computed for rows that attend no key at or past key_end: whole panels
  // up to the last such key (the last tile of a short sequence is narrower than KT: a 16-key
  // problem must not pay for a 128-key tile, nor a 16-token sentence padded to 128 for 64 keys).
  int tile_width(int64_t t, int64_t key_end) const {
    const int64_t n = std::min<int64_t>({KT, p_.Lk - t * KT, std::max<int64_t>(0, key_end - t * KT)});
    return int((n + PANEL - 1) / PANEL) * PANEL;
  }

  void pack_tile(Workspace& ws, int64_t t) {
    if (p_.k && p_.v) {  // plain float tensors: the common case, no per-row dispatch
      const float* k = p_.k + ws.b * p_.ks.b + ws.hkv * p_.ks.h;
      const float* v = p_.v + ws.b * p_.vs.b + ws.hkv * p_.vs.h;
      pack_rows(ws, t, [&](int64_t j) { return k + p_.key_slot(j) * p_.ks.l; },
                [&](int64_t j) { return v + p_.key_slot(j) * p_.vs.l; }, true);
      return;
    }
    // A KV cache (paged, or of another dtype: float16, q8, q4): float rows are read in place, other
    // rows converted to float once (dequantized, keys unrotated) into scratch, then packed.
    float* kr = ws.row_scratch.data();  // D + Dv floats (Workspace::reserve)
    float* vr = kr + p_.D;
    const bool k_float = p_.k_type == KVType::f32, v_float = p_.v_type == KVType::f32;
    pack_rows(ws, t,
              [&](int64_t j) -> const float* {
                const void* row = p_.key_row(ws.b, ws.hkv, j);
                if (k_float) return static_cast<const float*>(row);
                row_to_float(p_.k_type, row, p_.D, p_.keys_rotated, kr);
                return kr;
              },
              [&](int64_t j) -> const float* {
                const void* row = p_.value_row(ws.b, ws.hkv, j);
                if (v_float) return static_cast<const float*>(row);
                row_to_float(p_.v_type, row, p_.Dv, false, vr);
                return vr;
              },
              k_float);
  }

  // key_row(j) / value_row(j): key j's K / V row as floats (key j's row is slot key_slot(j): a ring).
  // direct_keys: key_row returns pointers into K that stay valid (not one reused scratch row), so
  // four keys at a time are transposed with vector shuffles.
  template <class KeyRow, class ValueRow>
  void pack_rows(Workspace& ws, int64_t t, KeyRow&& key_row, ValueRow&& value_row, bool direct_keys) {
    // No row of batch b attends a key at or past its key length: those are neither read nor packed.
    const int64_t klen = p_.key_length(ws.b);
    const int64_t j0 = t * KT, n = std::max<int64_t>(0, std::min<int64_t>(KT, klen - j0));
    const int kt = tile_width(t, klen);
    const int64_t D = p_.D;
    float* kp = ws.kpack.data() + t * KT * D;  // [KT / PANEL][D][PANEL]
    int64_t jj = 0;
    // Not in the WebAssembly tuning: there (Node 20, V8) this loop made the wasm function that
    // runs the key tiles (key_tile, CPU profile) about 2x slower, though it is not part of it: #1
    // 1.27 -> 1.79 ms in a same-process A/B, as were the row tiers (with_row_tier). Not understood;
    // the strided stores stay there.
    if (!kWasmTuning && direct_keys && D >= 4) {  // whole groups of 4 real keys (PANEL is a multiple of 4)
      for (; jj + 4 <= n; jj += 4) {
        const float* src[4] = {key_row(j0 + jj), key_row(j0 + jj + 1), key_row(j0 + jj + 2), key_row(j0 + jj + 3)};
        float* dst = kp + (jj / PANEL) * D * PANEL + jj % PANEL;
        int64_t d = 0;
        for (; d + 4 <= D; d += 4) {
          transpose4x4(src, dst + d * PANEL, PANEL);
          for (auto& r : src) r += 4;
        }
        for (int i = 0; i < 4; ++i)
          for (int64_t e = 0; d + e < D; ++e) dst[(d + e) * PANEL + i] = src[i][e];
      }
    }
    for (; jj < kt; ++jj) {
      float* dst = kp + (jj / PANEL) * D * PANEL + jj % PANEL;
      if (jj < n) {
        const float* src = key_row(j0 + jj);
        for (int64_t d = 0; d < D; ++d) dst[d * PANEL] = src[d];
      } else {
        for (int64_t d = 0; d < D; ++d) dst[d * PANEL] = 0.0f;
      }
    }
    // V panel-major, [dv_pad / PANEL][KT][PANEL], so each P·V chunk streams contiguous memory.
    float* vp = ws.vpack.data() + t * KT * dv_pad_;
    for (int64_t jj = 0; jj < kt; ++jj) {  // each source row read once, in order
      if (jj >= n) {  // keys past Lk: zero rows
        for (int64_t c0 = 0; c0 < dv_pad_; c0 += PANEL)
          std::fill_n(vp + (c0 / PANEL) * KT * PANEL + jj * PANEL, PANEL, 0.0f);
        continue;
      }
      const float* src = value_row(j0 + jj);
      for (int64_t c0 = 0; c0 < dv_pad_; c0 += PANEL) {
        const int64_t width = std::max<int64_t>(0, std::min<int64_t>(PANEL, p_.Dv - c0));
        float* dst = vp + (c0 / PANEL) * KT * PANEL + jj * PANEL;
        for (int64_t c = 0; c < width; ++c) dst[c] = src[c0 + c];
        for (int64_t c = width; c < PANEL; ++c) dst[c] = 0.0f;
      }
    }
    ws.packed[t] = all_finite(vp, kt, dv_pad_ / PANEL) ? kPackedFinite : kPacked;
  }

  // Whether the packed V tile (kt keys of each of `panels` panels) holds only finite values:
  // x - x is 0 for finite x and NaN for NaN and inf, so one vector sum tells.
  static bool all_finite(const float* vp, int kt, int64_t panels) {
    V acc = S::splat(0.0f);
    for (int64_t q = 0; q < panels; ++q)
      for (int64_t x = 0; x < int64_t(kt) * PANEL; x += W) {
        const V y = S::load(vp + q * KT * PANEL + x);
        acc = acc + (y - y);
      }
    return S::hsum(acc) == 0.0f;
  }

  // ---------------------------------------------------------------- one block of MR query rows

  // NB register blocks of MR rows walk the key tiles together; each block keeps its own softmax
  // state and output rows, and each (block, tile) pair is classified on its own.
  void query_superblock(Workspace& ws, int64_t b, int64_t h, int64_t i0) {
    Rows rows[NB];
    int n_blocks = 0;
    int64_t first = p_.Lk, last = 0;
    for (int s = 0; s < NB && i0 + s * MR < p_.Lq; ++s, ++n_blocks) {
      Rows& blk = rows[s];
      blk.i0 = i0 + s * MR;
      blk.n_rows = int(std::min<int64_t>(MR, p_.Lq - blk.i0));
      for (int r = 0; r < MR; ++r) {
        const int64_t i = blk.i0 + r;
        blk.keys[r] = i < p_.Lq ? row_keys(p_, b, i) : RowKeys{};
        blk.active[r] = !blk.keys[r].empty();
        blk.state[r] = SoftmaxRow{};
        if (blk.active[r]) {
          ++blk.n_active;
          first = std::min(first, blk.keys[r].first());
          last = std::max(last, blk.keys[r].last_exclusive());
          blk.key_end = std::max(blk.key_end, blk.keys[r].last_exclusive());
        }
      }
    }
    const int n_rows = int(std::min<int64_t>(NB * MR, p_.Lq - i0));
    float* w_rows = p_.weights ? p_.weights + ((b * p_.Hq + h) * p_.Lq + i0) * p_.Lk : nullptr;
    if (w_rows) std::fill(w_rows, w_rows + n_rows * p_.Lk, kNegInf);

    int64_t visited = 0;
    if (first < last) {
      load_query_rows(ws, b, h, i0, n_blocks);
      std::fill(ws.oacc.begin(), ws.oacc.begin() + NB * MR * dv_pad_, 0.0f);
      const int64_t t_begin = first / KT, t_end = (last + KT - 1) / KT;
      for (int64_t t = t_begin; t < t_end; ++t) {
        for (int s = 0; s < n_blocks; ++s) {
          if (rows[s].n_active == 0) continue;
          const TileClass cls = classify(ws, b, h, rows[s], t);
          if (cls == TileClass::skip) continue;
          ++visited;
          if (!ws.packed[t]) pack_tile(ws, t);
          key_tile(ws, b, h, rows[s], s, t, cls, w_rows ? w_rows + s * MR * p_.Lk : nullptr);
        }
      }
    }
    ws.stats.tiles_skipped += tiles_ * n_blocks - visited;
    for (int s = 0; s < n_blocks; ++s)
      finish_rows(ws, b, h, rows[s], s, int(std::min<int64_t>(MR, p_.Lq - rows[s].i0)),
                  w_rows ? w_rows + s * MR * p_.Lk : nullptr);
  }

  // Q rows of the super-block, stored per register block transposed, [D][MR], so that the Q·Kᵀ
  // micro-tile broadcasts q[r][d] from constant offsets. Rows past Lq are zeros.
  void load_query_rows(Workspace& ws, int64_t b, int64_t h, int64_t i0, int n_blocks) {
    if (p_.D == 0) return;  // no Q block (its buffer is empty: no pointer arithmetic on null)
    const float* q = p_.q + b * p_.qs.b + h * p_.qs.h;
    if constexpr (MR < 4) {
      // No 4x4 blocks (the WebAssembly tuning, MR = 2): row by row, as before the transposes.
      for (int r = 0; r < n_blocks * MR; ++r) {
        float* dst = ws.qblock.data() + (r / MR) * MR * p_.D + r % MR;
        const float* src = q + (i0 + r) * p_.qs.l;
        const bool real = i0 + r < p_.Lq;
        for (int64_t d = 0; d < p_.D; ++d) dst[d * MR] = real ? src[d] : 0.0f;
      }
      return;
    }
    const int64_t D = p_.D;
    for (int blk = 0; blk < n_blocks; ++blk) {
      float* qb = ws.qblock.data() + blk * MR * D;
      int r = 0;
      // Four real rows at a time by 4x4 transposes (MR = 2, the WebAssembly tuning, has none).
      for (; r + 4 <= MR && i0 + blk * MR + r + 4 <= p_.Lq && D >= 4; r += 4) {
        const float* src[4];
        for (int x = 0; x < 4; ++x) src[x] = q + (i0 + blk * MR + r + x) * p_.qs.l;
        int64_t d = 0;
        for (; d + 4 <= D; d += 4) {
          transpose4x4(src, qb + d * MR + r, MR);
          for (auto& s : src) s += 4;
        }
        for (int x = 0; x < 4; ++x)
          for (int64_t e = 0; d + e < D; ++e) qb[(d + e) * MR + r + x] = src[x][e];
      }
      for (; r < MR; ++r) {
        const int64_t i = i0 + blk * MR + r;
        const float* src = i < p_.Lq ? q + i * p_.qs.l : nullptr;
        for (int64_t d = 0; d < D; ++d) qb[d * MR + r] = src ? src[d] : 0.0f;
      }
    }
  }

  // ---------------------------------------------------------------- tile classification

  TileClass classify(Workspace& ws, int64_t b, int64_t h, const Rows& rows, int64_t t) {
    const int64_t j0 = t * KT, j1 = j0 + KT;
    bool all_cover = true, all_miss = true;
    for (int r = 0; r < MR; ++r) {
      if (!rows.active[r]) continue;
      all_cover = all_cover && rows.keys[r].covers(j0, j1);
      all_miss = all_miss && rows.keys[r].misses(j0, j1);
    }
    if (all_miss) return TileClass::skip;
    TileClass cls = all_cover ? TileClass::full : TileClass::mixed;
    if (p_.query_segments) cls = combine(cls, classify_segments(ws, b, rows, t));
    if (cls != TileClass::skip && p_.allowed) cls = combine(cls, classify_allowed(b, h, rows, t));
    if (cls != TileClass::skip && p_.bias) cls = combine(cls, classify_bias(b, h, rows, t));
    if (cls == TileClass::full && p_.tree_parents) {  // tree keys: each row sees only its ancestors
      const int64_t t0 = p_.tree_start(b);
      if ((t + 1) * KT > t0 && t * KT < t0 + p_.Lq) cls = TileClass::mixed;
    }
    return cls;
  }

  TileClass classify_segments(const Workspace& ws, int64_t b, const Rows& rows, int64_t t) const {
    const int32_t lo = ws.seg_min[t], hi = ws.seg_max[t];
    const int32_t* sq = p_.query_segments + b * p_.Lq + rows.i0;
    bool all_equal = lo == hi, none = true;
    for (int r = 0; r < MR; ++r) {
      if (!rows.active[r]) continue;
      all_equal = all_equal && sq[r] == lo;
      none = none && (sq[r] < lo || sq[r] > hi);
    }
    return none ? TileClass::skip : all_equal ? TileClass::full : TileClass::mixed;
  }

  TileClass classify_allowed(int64_t b, int64_t h, const Rows& rows, int64_t t) const {
    const int64_t j0 = t * KT, n = std::min<int64_t>(KT, p_.Lk - j0);
    const int64_t step = p_.allowed.strides[3];
    bool any_on = false, any_off = n < KT;
    for (int r = 0; r < MR; ++r) {
      if (!rows.active[r]) continue;
      const uint8_t* row = mask_row(p_.allowed, b, h, rows.i0 + r) + j0 * step;
      for (int64_t j = 0; j < (step ? n : 1); ++j) {
        const bool on = row[j] != 0;
        any_on |= on;
        any_off |= !on;
      }
      if (any_on && any_off) return TileClass::mixed;
    }
    return !any_on ? TileClass::skip : any_off ? TileClass::mixed : TileClass::full;
  }

  TileClass classify_bias(int64_t b, int64_t h, const Rows& rows, int64_t t) const {
    const int64_t j0 = t * KT, n = std::min<int64_t>(KT, p_.Lk - j0);
    const int64_t step = p_.bias.strides[3];
    bool any_open = false, any_closed = n < KT;
    for (int r = 0; r < MR; ++r) {
      if (!rows.active[r]) continue;
      const float* row = mask_row(p_.bias, b, h, rows.i0 + r) + j0 * step;
      for (int64_t j = 0; j < (step ? n : 1); ++j) {
        const bool closed = row[j] == kNegInf;
        any_open |= !closed;
        any_closed |= closed;
      }
      if (any_open && any_closed) return TileClass::mixed;
    }
    return !any_open ? TileClass::skip : any_closed ? TileClass::mixed : TileClass::full;
  }

  // ---------------------------------------------------------------- one key tile

  void key_tile(Workspace& ws, int64_t b, int64_t h, Rows& rows, int blk, int64_t t, TileClass cls,
                float* w_rows) {
    float* oacc = ws.oacc.data() + blk * MR * dv_pad_;
    (cls == TileClass::full ? ws.stats.tiles_full : ws.stats.tiles_mixed) += 1;
    const int64_t j0 = t * KT;
    float* s = ws.scores.data();  // [MR][KT]
    const float* kp = ws.kpack.data() + t * KT * p_.D;
    const int kt = tile_width(t, cls == TileClass::full ? p_.Lk : rows.key_end);
    const float* qb = ws.qblock.data() + blk * MR * p_.D;
    with_row_tier(rows.n_rows, [&](auto tier) {
      for (int c = 0; c < kt / PANEL; ++c) qk_panel<tier.value>(qb, kp + c * p_.D * PANEL, s + c * PANEL);
    });

    const bool masked = cls == TileClass::mixed;
    const bool elementwise = masked && elementwise_;
    if (elementwise) element_masks(ws, b, h, rows, t);
    for (int r = 0; r < MR; ++r) {
      if (!rows.active[r]) continue;
      const int64_t i = rows.i0 + r;
      float* srow = s + r * KT;
      const float* bias_row = nullptr;
      if (p_.bias) bias_row = elementwise ? ws.bias_tile.data() + r * KT : nullptr;
      const float* full_bias = (p_.bias && !elementwise) ? mask_row(p_.bias, b, h, i) : nullptr;
      const float rowmax = logits_.row(srow, kt, j0, b, h, i, rows.keys[r], masked,
                                      elementwise ? ws.valid.data() + r * KT : nullptr, bias_row,
                                      full_bias, rows.state[r].has_key);
      if (!masked) rows.state[r].has_key = true;
      if (w_rows) {
        // Columns past kt were not computed: every row of the block masks them (-inf, as filled).
        const int64_t n = std::min<int64_t>({KT, p_.Lk - j0, kt});
        std::memcpy(w_rows + r * p_.Lk + j0, srow, sizeof(float) * n);
      }
      OnlineSoftmax<Arch>::update(rows.state[r], srow, kt, rowmax, oacc + r * dv_pad_, dv_pad_);
    }
    // A mixed tile whose V is all finite can use the register-blocked P·V too: its masked weights
    // are exactly 0 and 0 * finite adds nothing. Only NaN or inf in V (0 * NaN = NaN) needs the
    // row-by-row path that never reads a masked key's V.
    if (cls == TileClass::full || ws.packed[t] == kPackedFinite) {
      with_row_tier(rows.n_rows, [&](auto tier) { pv_block<tier.value>(oacc, s, ws.vpack.data() + t * KT * dv_pad_, kt); });
    } else {
      for (int r = 0; r < MR; ++r)
        if (rows.active[r]) pv_row_masked(ws, oacc + r * dv_pad_, rows, r, t, elementwise);
    }
  }

  // The last register block of a short sequence holds fewer than MR real rows (64 rows are 5
  // blocks of 12 and one of 4): its micro-tiles run with R = the smallest tier that holds them,
  // thirds of MR where MR divides by 3, else halves, instead of computing padding rows.
  // The micro-tiles: out of line in WebAssembly (inlined, they made key_tile compile ~15% slower
  // there), inlined into key_tile natively (measured 2% faster on #1 with AVX-512, g++ 12, whose
  // own choice flips with unrelated edits).
#if defined(__GNUC__) && !defined(__wasm__)
#define MASKATTN_MICROTILE __attribute__((always_inline)) inline
#else
#define MASKATTN_MICROTILE MASKATTN_NOINLINE
#endif
  static constexpr int kTier1 = MR % 3 == 0 ? MR / 3 : std::max(1, MR / 2);
  static constexpr int kTier2 = MR % 3 == 0 ? 2 * MR / 3 : MR;
  template <class F>
  static void with_row_tier(int n_rows, F&& f) {
    if (kWasmTuning) f(std::integral_constant<int, MR>{});  // see pack_rows: V8 compiled key_tile 2x slower
    else if (n_rows <= kTier1) f(std::integral_constant<int, kTier1>{});
    else if (n_rows <= kTier2) f(std::integral_constant<int, kTier2>{});
    else f(std::integral_constant<int, MR>{});
  }

  // S[R][PANEL] = Q_block · K_panelᵀ (rows < R of the block), accumulators in registers across all of D.
  template <int R>
  MASKATTN_MICROTILE void qk_panel(const float* qb, const float* kpanel, float* s) const {
    V acc[R][NV];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < NV; ++c) acc[r][c] = S::splat(0.0f);
    const int64_t D = p_.D;
    for (int64_t d = 0; d < D; ++d) {
      V kv[NV];
      for (int c = 0; c < NV; ++c) kv[c] = S::load(kpanel + d * PANEL + c * W);
      for (int r = 0; r < R; ++r) {
        const V qv = S::splat(qb[d * MR + r]);
        for (int c = 0; c < NV; ++c) acc[r][c] = S::fma(qv, kv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < NV; ++c) S::store(s + r * KT + c * W, acc[r][c]);
  }

  // Element-wise rules of a mixed tile gathered once per row: valid[r][j] (1/0) and bias values.
  void element_masks(Workspace& ws, int64_t b, int64_t h, const Rows& rows, int64_t t) const {
    const int64_t j0 = t * KT, n = std::min<int64_t>(KT, p_.Lk - j0);
    for (int r = 0; r < MR; ++r)
      if (rows.active[r])
        logits_.element_row(b, h, rows.i0 + r, j0, n, KT, ws.valid.data() + r * KT, ws.bias_tile.data() + r * KT);
  }

  // O[R][Dv] += P[R][KT] · V_tile, register-blocked: R rows x one V panel (NV vectors).
  template <int R>
  MASKATTN_MICROTILE void pv_block(float* oacc, const float* pmat, const float* vtile, int kt) const {
    for (int v0 = 0; v0 < dv_vectors_; v0 += NV) {
      const float* vpanel = vtile + (v0 / NV) * KT * PANEL;
      V acc[R][NV];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < NV; ++c) acc[r][c] = S::load(oacc + r * dv_pad_ + (v0 + c) * W);
      for (int j = 0; j < kt; ++j) {
        V vv[NV];
        for (int c = 0; c < NV; ++c) vv[c] = S::load(vpanel + j * PANEL + c * W);
        for (int r = 0; r < R; ++r) {
          const V pj = S::splat(pmat[r * KT + j]);
          for (int c = 0; c < NV; ++c) acc[r][c] = S::fma(pj, vv[c], acc[r][c]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < NV; ++c) S::store(oacc + r * dv_pad_ + (v0 + c) * W, acc[r][c]);
    }
  }

  // Row r of a mixed tile: only keys the row may attend are read, so masked V (padding, future
  // tokens, NaN) never meets a zero weight (0 * NaN would leak).
  void pv_row_masked(Workspace& ws, float* o, const Rows& rows, int r, int64_t t, bool elementwise) const {
    const int64_t j0 = t * KT;
    const RowKeys& keys = rows.keys[r];
    // The row's allowed keys in this tile: [0, prefix_end) and [lo, hi), clipped, merged if they touch.
    int64_t ranges[2][2];
    int n_ranges = 0;
    auto add = [&](int64_t a, int64_t z) {
      a = std::max(a, j0) - j0;
      z = std::min(z, j0 + KT) - j0;
      if (z <= a) return;
      if (n_ranges > 0 && a <= ranges[n_ranges - 1][1]) {
        ranges[n_ranges - 1][1] = std::max(ranges[n_ranges - 1][1], z);
      } else {
        ranges[n_ranges][0] = a;
        ranges[n_ranges][1] = z;
        ++n_ranges;
      }
    };
    add(0, keys.prefix_end);
    add(keys.lo, keys.hi);
    if (n_ranges == 2 && ranges[1][0] < ranges[0][0]) std::swap(ranges[0], ranges[1]);
    const float* prow = ws.scores.data() + r * KT;
    const float* valid = elementwise ? ws.valid.data() + r * KT : nullptr;
    const float* vtile = ws.vpack.data() + t * KT * dv_pad_;
    // Two V panels per pass over the keys (one for an odd last panel).
    for_vector_chunks<2>(dv_vectors_ / NV, [&](int p0, auto np_tag) {
      constexpr int NP = decltype(np_tag)::value;
      V acc[NP][NV];
      for (int q = 0; q < NP; ++q)
        for (int c = 0; c < NV; ++c) acc[q][c] = S::load(o + ((p0 + q) * NV + c) * W);
      for (int k = 0; k < n_ranges; ++k) {
        for (int64_t j = ranges[k][0]; j < ranges[k][1]; ++j) {
          if (valid && valid[j] == 0.0f) continue;
          const V pj = S::splat(prow[j]);
          for (int q = 0; q < NP; ++q)
            for (int c = 0; c < NV; ++c)
              acc[q][c] = S::fma(pj, S::load(vtile + (p0 + q) * KT * PANEL + j * PANEL + c * W), acc[q][c]);
        }
      }
      for (int q = 0; q < NP; ++q)
        for (int c = 0; c < NV; ++c) S::store(o + ((p0 + q) * NV + c) * W, acc[q][c]);
    });
  }

  // ---------------------------------------------------------------- row results

  void finish_rows(Workspace& ws, int64_t b, int64_t h, const Rows& rows, int blk, int n_rows, float* w_rows) {
    for (int r = 0; r < n_rows; ++r) {
      write_row_result<Arch>(p_, b, h, rows.i0 + r, rows.state[r], ws.oacc.data() + (blk * MR + r) * dv_pad_,
                             w_rows ? w_rows + r * p_.Lk : nullptr, [&]() -> const float* {
                               if (!ws.mean_v_ready) mean_of_values(p_, ws.b, ws.hkv, ws.mean_v.data());
                               ws.mean_v_ready = true;
                               return ws.mean_v.data();
                             });
    }
  }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
