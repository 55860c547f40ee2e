// The prefill kernel (many query rows per KV head group), written once against Simd<Arch>
// (kernel/simd.hpp) and instantiated per architecture by the small files in dispatch/. The decode
// kernel (few rows, long keys) is beside it in decode_kernel.hpp; kernel/run.hpp picks one.
//
// Rows in lanes. A block is QR = RV x W query rows of one (batch, kv head): the rows of the
// group's query heads stacked (GQA), so every row of a block reads the same K and V. A block walks
// its keys NK at a time (a "group"): Q·Kᵀ leaves NK x RV vectors of scores in registers, lane r of
// vector (j, v) holding row v*W + r's score with key j, and they stay there through the logits, the
// masks, the softmax and P·V. So a row's max and sum are vertical operations on vectors, never
// horizontal reductions, and the exponentials of one group run between the matrix work of its
// neighbours (FlashAttention's overlap, left to the out-of-order core). Q·Kᵀ broadcasts K elements
// and P·V broadcasts V elements, so float K and V are read in place, never packed; KV caches of
// other dtypes are converted to float rows once per (batch, kv head). The output accumulates
// transposed, Oᵀ[Dv][QR], and is turned back into rows once per block.
//
// NB blocks form a super-block that walks the key tiles (KT keys) together, so each tile's K and V
// are reused from L1/L2. Each (block, tile) pair is classified:
//   skip   - every pair masked: nothing computed, K/V not touched;
//   full   - every pair allowed: no per-element mask work;
//   mixed  - an interval edge or an element-wise rule cuts it: masks applied per element (rows'
//            key intervals as lane-wise compares; element-wise rules as bits in lanes).
// Rescaling is lazy (as in FlashAttention-4): a row's reference max m moves only when a score
// exceeds it by more than kRescaleAbove, so the accumulated output is rarely rescaled; weights
// e^(s - m) then stay below e^5.5 ~ 245, exact enough in float, and O / l is unchanged. Whether a
// row is fully masked comes from the masks (has_key), never from scores.
// Semantics: docs/semantics.md, "Two kernels, one contract".
#pragma once

#include "base/arch_namespace.hpp"
#include "base/compiler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "problem/problem.hpp"
#include "kernel/logits.hpp"
#include "kernel/online_softmax.hpp"
#include "kernel/quant.hpp"
#include "kernel/simd.hpp"
#include "kernel/workspace.hpp"
#include "problem/row_keys.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// The steps of a group are inlined into one function: its scores stay in registers from Q·Kᵀ to
// P·V. (In WebAssembly a tile's groups are one function, kept apart from its caller: see key_tile.)
#define MASKATTN_MICROTILE MASKATTN_ALWAYS_INLINE inline

template <class Arch>
class PrefillAttention {
  using S = Simd<Arch>;
  using V = typename S::V;
  using M = typename S::M;
  static constexpr int W = S::W;

 public:
  // Register blocking: NK x RV score vectors, plus RV query (or output) vectors and one broadcast.
  //   AVX-512 (32 registers): 8 keys x 2 vectors of 16 rows (16 accumulators, 32 rows a block).
  //   AVX2 (16): 4 keys x 3 vectors of 8 rows (12 accumulators).
  //   SSE2 and WebAssembly (16 XMM, no FMA: mul + add needs a temporary; V8 keeps one as scratch):
  //   4 keys x 2 vectors of 4 rows. AArch64 NEON (32): 8 keys x 2 vectors. Scalar: 4 x 4.
  static constexpr bool kNeonTuning = S::kRegisters >= 32 && W == 4;
  static constexpr int RV = W == 1 ? 4 : W == 8 ? 3 : 2;
  static constexpr int NK = (W == 16 || kNeonTuning) ? 8 : 4;
  static constexpr int QR = RV * W;  // query rows per block
  static constexpr int KT = 64;      // keys per tile: classification and dtype conversion
  static constexpr int NB = 128 / QR > 0 ? 128 / QR : 1;  // blocks per super-block (about 128 rows)
  static constexpr int TB = W >= 4 ? W : 4;  // rows <-> lanes move by TB x TB transposes (simd.hpp)
  static_assert(KT % NK == 0, "a key tile holds whole groups");
  static_assert(QR % TB == 0 && TB % 4 == 0, "blocks transpose TB rows at a time");
  // A row's reference max moves when a score exceeds it by more than this (e^5.5 ~ 245).
  static constexpr float kRescaleAbove = 5.5f;
  // ws.tile_flags[t], per (b, kv head): K/V rows converted to float; V's finiteness known; finite.
  static constexpr uint8_t kConverted = 1, kFiniteKnown = 2, kFinite = 4;

  explicit PrefillAttention(const Problem& p) : p_(p), logits_(p) {
    // A ring's tiles hold its sink tokens' (at 0) and its window's, wherever the window has moved
    // (tile_slot): its scratch follows its slots, never the positions it has seen.
    const int64_t all = (p.Lk + KT - 1) / KT;
    tiles_ = p.kv.ring ? std::min(all, (p.kv.sink_tokens + KT - 1) / KT + (p.kv.sink_tokens + p.kv.ring + KT - 1) / KT + 1) : all;
    elementwise_ = p.has_elementwise_rules();
    k_direct_ = reads_directly(p.kv.k_type);
    v_direct_ = reads_directly(p.kv.v_type);
  }

  // Rows of one (batch, kv head): the group's query heads stacked, row f = (h - hkv * group) * Lq + i.
  int64_t rows() const { return p_.group * p_.Lq; }
  static int64_t query_blocks(int64_t rows) { return (rows + NB * QR - 1) / (NB * QR); }

  // Runs super-blocks [block_begin, block_end) of the rows of kv head `hkv`, batch `b`.
  void run(Workspace& ws, int64_t b, int64_t hkv, int64_t block_begin, int64_t block_end) {
    prepare(ws, b, hkv);
    for (int64_t blk = block_begin; blk < block_end; ++blk) superblock(ws, b, hkv, blk * NB * QR);
  }

  // Split-K (run_prefill): super-block `sb` of (b, hkv) over keys [key_lo, key_hi) only (key_lo a
  // multiple of KT), leaving each row's softmax state and unnormalised output (o_stride floats a
  // row, zeros where the chunk computed nothing) at states / o, row f0 + r at index r, for the
  // caller to merge and finish.
  void run_keys(Workspace& ws, int64_t b, int64_t hkv, int64_t sb, int64_t key_lo, int64_t key_hi, SoftmaxRow* states,
                float* o, int64_t o_stride) {
    prepare(ws, b, hkv);
    superblock(ws, b, hkv, sb * NB * QR, Partial{key_lo, key_hi, states, o, o_stride});
  }

  void reserve(Workspace& ws) const {
    const bool convert = !k_direct_ || !v_direct_;
    ws.reserve_prefill(tiles_, KT, convert ? p_.D : 0, convert ? p_.Dv : 0, p_.D, p_.Dv, NB, QR, NK);
  }

  // The micro-tiles alone, for bench/microkernel: `reps` passes over one key tile in L1 (ws.qblock
  // [D][QR], K rows ws.ktiles [KT][D], V rows ws.vtiles [KT][Dv], as the caller filled them after
  // reserve()). qk: Q·Kᵀ of QR rows x KT keys, group by group; without pv its scores are stored to
  // ws.scores [KT][QR] (with pv they stay in registers and feed P·V at once). pv alone: P·V of the
  // scores in ws.scores into ws.oacc [Dv][QR]. No softmax and no masks: these loops bound the
  // kernel's share of the FMA peak.
  void microtiles_only(Workspace& ws, int64_t reps, bool qk, bool pv) const {
    const float* k = ws.ktiles.data();
    const float* v = ws.vtiles.data();
    for (int64_t n = 0; n < reps; ++n)
      for (int g = 0; g < KT / NK; ++g) {
        V acc[NK][RV];
        float* s = ws.scores.data() + g * NK * QR;
        if (qk) qk_group<RV>(ws.qblock.data(), k + g * NK * p_.D, p_.D, acc);
        else
          for (int j = 0; j < NK; ++j)
            for (int r = 0; r < RV; ++r) acc[j][r] = S::load(s + j * QR + r * W);
        if (pv) pv_group<RV>(ws.oacc.data(), v + g * NK * p_.Dv, p_.Dv, acc);
        else
          for (int j = 0; j < NK; ++j)
            for (int r = 0; r < RV; ++r) S::store(s + j * QR + r * W, acc[j][r]);
      }
  }

 private:
  const Problem& p_;
  Logits<Arch> logits_;
  int64_t tiles_ = 0;  // tile slots of the per-(b, kv head) scratch (tile_flags, converted rows, segments)
  // Tile t's slot (prepare() sets these per sequence): t itself, or for a ring whose window has
  // moved past its sink tokens, the sink tiles [0, sink_tiles_) then the window's from window_tile_.
  // The tiles between hold no key and are never visited (superblock jumps them).
  int64_t sink_tiles_ = 0, window_tile_ = 0;
  int64_t tile_slot(int64_t t) const { return t < sink_tiles_ ? t : sink_tiles_ + (t - window_tile_); }
  bool elementwise_ = false;
  bool k_direct_ = true, v_direct_ = true;  // rows read in place (float), else converted per tile

  // One block of QR rows: who they are and which keys they may attend, lane by lane. (Arrays
  // without initializers: a super-block's blocks are filled, not zeroed, on every call.)
  struct Block {
    int64_t f0 = 0;          // first row (stacked index) of the block
    int n_rows = 0;          // real rows (f < rows()); the rest are padding lanes
    int n_active = 0;        // rows that may attend some key by their intervals
    int64_t first = 0, last = 0;  // smallest interval holding every active row's keys
    int64_t prefix_end = 0, main_lo = 0;  // the rows' prefixes end by prefix_end; their main intervals start at main_lo or later
    int64_t key_end = 0;     // no active row attends a key at or past it
    bool o_zero = true;      // nothing accumulated yet: the first rescale has nothing to scale
    int64_t h[QR], i[QR];
    int64_t key_lo[QR], key_hi[QR], key_prefix[QR];  // the rows' RowKeys
    bool active[QR];
    // Lane vectors: the key intervals as float positions, 1/0 for active rows, and ALiBi's d(i)
    // and -slope.
    // Positions relative to `origin` (rebase: the tile being computed), so the lanes stay exact
    // however far a ring's positions have counted (2^31), where absolute ones would not (2^24).
    alignas(64) float lo[QR], hi[QR], pe[QR], act[QR], diag[QR], neg_slope[QR];
    int64_t origin = 0;
    RowKeys keys(int r) const {
      RowKeys k;
      k.lo = key_lo[r];
      k.hi = key_hi[r];
      k.prefix_end = key_prefix[r];
      return k;
    }
  };

  // ---------------------------------------------------------------- per (b, kv head)

  // Per (b, kv head): tile flags cleared, the sequence's tile slots, the key segments' range per tile.
  void prepare(Workspace& ws, int64_t b, int64_t hkv);

  // Converts tile t's K and/or V rows (a KV cache of another dtype: float16, q8, q4; keys
  // unrotated) into float rows [KT][D] / [KT][Dv], zero past the sequence's key length.
  void convert_tile(Workspace& ws, int64_t t);

  // Whether tile t's V rows (below the key length) hold only finite values: x - x is 0 for finite
  // x and NaN for NaN and inf, so one vector sum tells. Asked only by mixed tiles, once per tile.
  // Rows are walked in runs at one stride (a ring's wrap and a page's end cut them), a run of rows
  // packed back to back as one range, on four chains (the adds' latency).
  bool v_finite(Workspace& ws, int64_t t) {
    uint8_t& flags = ws.tile_flags[tile_slot(t)];
    if (!(flags & kFiniteKnown)) {
      const int64_t j0 = t * KT, Dv = p_.Dv;
      const int64_t n = std::max<int64_t>(0, std::min<int64_t>(KT, p_.key_length(ws.b) - j0));
      V acc[4] = {S::splat(0.0f), S::splat(0.0f), S::splat(0.0f), S::splat(0.0f)};
      float tail = 0.0f;
      for (int64_t j = 0; j < n && Dv > 0;) {
        const int64_t run = v_direct_ ? std::min(n - j, p_.kv.contiguous_keys(j0 + j)) : n - j;
        const int64_t stride = v_direct_ ? p_.kv.vs.l : Dv;
        const bool packed = stride == Dv;
        const int64_t width = packed ? run * Dv : Dv;
        const float* row = value_row(ws, t, j0 + j);
        for (int64_t x = 0; x < (packed ? 1 : run); ++x, row += stride) {
          int64_t c = 0;
          for (; c + 4 * W <= width; c += 4 * W)
            for (int u = 0; u < 4; ++u) {
              const V y = S::load(row + c + u * W);
              acc[u] = acc[u] + (y - y);
            }
          for (; c + W <= width; c += W) {
            const V y = S::load(row + c);
            acc[0] = acc[0] + (y - y);
          }
          for (; c < width; ++c) tail += row[c] - row[c];
        }
        j += run;
      }
      flags |= kFiniteKnown | ((S::hsum((acc[0] + acc[1]) + (acc[2] + acc[3])) + tail == 0.0f) ? kFinite : 0);
    }
    return flags & kFinite;
  }

  const float* value_row(const Workspace& ws, int64_t t, int64_t j) const {
    if (!v_direct_) return ws.vtiles.data() + (tile_slot(t) * KT + (j - t * KT)) * p_.Dv;
    return static_cast<const float*>(p_.kv.value_row(ws.b, ws.hkv, j));
  }

  // K and V rows of the NK keys from jg (nk of them real): base pointers and row strides. In place
  // when the rows are float and NK consecutive rows lie at a fixed stride; else (a ring's wrap, a
  // page's end, the last keys of a sequence) copied into ws.edge_rows, zero past nk.
  void group_rows(Workspace& ws, int64_t jg, int nk, const float*& k, int64_t& kst, const float*& v,
                  int64_t& vst) const {
    const bool in_place = nk == NK && p_.kv.contiguous_keys(jg) >= NK;
    auto side = [&](bool direct, const float* converted, int64_t width, int64_t stride, float* edge, auto&& row_of,
                    const float*& base, int64_t& step) {
      if (!direct) {
        base = converted + (tile_slot(jg / KT) * KT + jg % KT) * width;  // a group never crosses a tile
        step = width;
      } else if (in_place) {
        base = static_cast<const float*>(row_of(jg));
        step = stride;
      } else {
        for (int j = 0; j < NK; ++j) {
          if (j >= nk) std::fill(edge + j * width, edge + (j + 1) * width, 0.0f);
          else if (width > 0) std::memcpy(edge + j * width, row_of(jg + j), sizeof(float) * size_t(width));  // D = 0: no rows, no buffer
        }
        base = edge;
        step = width;
      }
    };
    side(k_direct_, ws.ktiles.data(), p_.D, p_.kv.ks.l, ws.edge_rows.data(),
         [&](int64_t j) { return p_.kv.key_row(ws.b, ws.hkv, j); }, k, kst);
    side(v_direct_, ws.vtiles.data(), p_.Dv, p_.kv.vs.l, ws.edge_rows.data() + NK * p_.D,
         [&](int64_t j) { return p_.kv.value_row(ws.b, ws.hkv, j); }, v, vst);
  }

  // ---------------------------------------------------------------- one super-block

  // Where a split-K chunk's rows go (run_keys); none: the whole key range, rows finished here.
  struct Partial {
    int64_t key_lo = 0, key_hi = 0;
    SoftmaxRow* states = nullptr;
    float* o = nullptr;
    int64_t o_stride = 0;
  };

  void superblock(Workspace& ws, int64_t b, int64_t hkv, int64_t f0, const Partial& part = Partial{}) {
    const bool split = part.states != nullptr;
    Block blocks[NB];
    int n_blocks = 0;
    int64_t first = p_.Lk, last = 0, prefix_end = 0, main_lo = p_.Lk;
    const int64_t R = rows();
    for (int s = 0; s < NB && f0 + s * QR < R; ++s, ++n_blocks) {
      Block& blk = blocks[s];
      init_block(blk, b, hkv, f0 + s * QR);
      if (blk.n_active) {
        first = std::min(first, blk.first);
        last = std::max(last, blk.last);
        prefix_end = std::max(prefix_end, blk.prefix_end);
        main_lo = std::min(main_lo, blk.main_lo);
      }
      float* state = ws.row_state.data() + s * 3 * QR;  // m, l, seen
      std::fill(state, state + QR, kNegInf);
      std::fill(state + QR, state + 3 * QR, 0.0f);
      if (p_.weights && !split)  // (split: run_prefill fills them once, each chunk writes its keys)
        for (int r = 0; r < blk.n_rows; ++r) std::fill_n(weights_row(b, blk, r), p_.Lk, kNegInf);
    }

    int64_t visited = 0;
    if (split) {
      first = std::max(first, part.key_lo);
      last = std::min(last, part.key_hi);
    }
    if (first < last) {
      load_query_rows(ws, b, blocks, n_blocks);  // (Oᵀ needs no zeroing: a block's first P·V stores)
      const int64_t t_begin = first / KT, t_end = (last + KT - 1) / KT;
      // Tiles no row attends between the prefixes and the main intervals (a ring's sink tokens and
      // its window, millions of positions apart) are jumped, not classified one by one.
      const int64_t gap_begin = (prefix_end + KT - 1) / KT, gap_end = main_lo / KT;
      for (int64_t t = t_begin; t < t_end; ++t) {
        if (t >= gap_begin && t < gap_end) t = gap_end;
        if (t >= t_end) break;
        for (int s = 0; s < n_blocks; ++s) {
          Block& blk = blocks[s];
          if (blk.n_active == 0) continue;
          const TileClass cls = classify(ws, b, blk, t);
          if (cls == TileClass::skip) continue;
          ++visited;
          if ((!k_direct_ || !v_direct_) && !(ws.tile_flags[tile_slot(t)] & kConverted)) convert_tile(ws, t);
          // A block of fewer rows (the last of a short sequence) computes only the vectors it fills.
          const int rv = row_vectors(blk.n_rows);
          if constexpr (kRowTiers) {
            if (rv == 1) key_tile<1>(ws, b, blk, s, t, cls);
            else if (rv == 2) key_tile<RV >= 2 ? 2 : RV>(ws, b, blk, s, t, cls);
            else key_tile<RV>(ws, b, blk, s, t, cls);
          } else {
            key_tile<RV>(ws, b, blk, s, t, cls);
          }
        }
      }
    }
    if (!split) {
      ws.stats.tiles_skipped += tiles_ * n_blocks - visited;
      for (int s = 0; s < n_blocks; ++s) finish_block(ws, b, blocks[s], s);
      return;
    }
    const int64_t chunk_tiles = (part.key_hi + KT - 1) / KT - part.key_lo / KT;
    ws.stats.tiles_skipped += chunk_tiles * n_blocks - visited;
    for (int s = 0; s < n_blocks; ++s) export_block(ws, blocks[s], s, part);
  }

  // A split-K chunk's rows of block s: state, and the output row out of Oᵀ (zeros where the row
  // computed nothing in the chunk: its lanes of Oᵀ may hold nothing).
  void export_block(Workspace& ws, const Block& blk, int s, const Partial& part) const {
    const float* state = ws.row_state.data() + s * 3 * QR;
    const float* oT = ws.oacc.data() + s * QR * p_.Dv;
    for (int r = 0; r < blk.n_rows; ++r) {
      const int64_t slot = blk.f0 % (NB * QR) + r;  // the row's index within its super-block
      SoftmaxRow& st = part.states[slot];
      st.m = state[r];
      st.l = state[QR + r];
      st.has_key = state[2 * QR + r] != 0.0f;
      // A NaN score may stay out of m (softmax_group: it makes l and Oᵀ NaN instead); the merge
      // reads a part's NaN from m.
      if (st.l != st.l) st.m = st.l;
      float* o = part.o + slot * part.o_stride;
      if (st.m == kNegInf) {  // no finite score: only 0 x a NaN or infinite V (an allowed pair) counts
        bool nan = false;
        for (int64_t c = 0; c < p_.Dv && !blk.o_zero; ++c) nan = nan || oT[c * QR + r] != oT[c * QR + r];
        if (!nan) {
          std::fill_n(o, part.o_stride, 0.0f);
          continue;
        }
        // The NaN reaches the output through the merge (weight e^(m - M) = 0 times NaN) while l,
        // lse and the weights stay those of the other chunks, as in one pass (m = -inf would be
        // skipped, NaN would spoil them).
        st.m = -std::numeric_limits<float>::max();
      }
      for (int64_t c = 0; c < p_.Dv; ++c) o[c] = oT[c * QR + r];
      std::fill(o + p_.Dv, o + part.o_stride, 0.0f);
    }
  }

  // Row vectors a block of n rows computes: 1, 2 (when RV > 2) or RV.
  // Native SIMD only: in WebAssembly (and the scalar kernel) each tier is one more copy of the
  // group step in the download (+15% for the tiers), for blocks a short sequence rarely has.
  static constexpr bool kRowTiers = W > 1 && S::kRegisters >= 16;
  static int row_vectors(int n) {
    if (!kRowTiers) return RV;
    return n <= W ? 1 : (RV > 2 && n <= 2 * W) ? 2 : RV;
  }

  void init_block(Block& blk, int64_t b, int64_t hkv, int64_t f0) const {
    blk.f0 = f0;
    blk.n_rows = int(std::min<int64_t>(QR, rows() - f0));
    blk.n_active = 0;
    blk.first = p_.Lk;
    blk.last = 0;
    blk.prefix_end = 0;
    blk.main_lo = p_.Lk;
    blk.key_end = 0;
    blk.o_zero = true;
    blk.origin = 0;
    int64_t h = hkv * p_.group + f0 / p_.Lq, i = f0 % p_.Lq;  // stepped row by row (no division)
    for (int r = 0; r < QR; ++r) {
      const bool real = r < blk.n_rows;
      blk.h[r] = real ? h : hkv * p_.group;
      blk.i[r] = real ? i : 0;
      const RowKeys keys = real ? row_keys(p_, b, i) : RowKeys{};
      blk.key_lo[r] = keys.lo;
      blk.key_hi[r] = keys.hi;
      blk.key_prefix[r] = keys.prefix_end;
      blk.active[r] = !keys.empty();
      if (blk.active[r]) {
        ++blk.n_active;
        blk.first = std::min(blk.first, keys.first());
        blk.last = std::max(blk.last, keys.last_exclusive());
        blk.prefix_end = std::max(blk.prefix_end, keys.prefix_end);
        if (keys.hi > keys.lo) blk.main_lo = std::min(blk.main_lo, keys.lo);
      }
      blk.act[r] = blk.active[r] ? 1.0f : 0.0f;
      blk.neg_slope[r] = p_.alibi_slopes && real ? -p_.alibi_slopes[blk.h[r]] : 0.0f;
      if (real && ++i == p_.Lq) {
        i = 0;
        ++h;
      }
    }
    blk.key_end = blk.last;
    rebase(blk, b, 0);
  }

  // The block's position lanes relative to j0: exact while |position - j0| < 2^24 (any key of the
  // tile against any row's interval edges; ALiBi's distance is rounded as fp32 rounds it anyway).
  void rebase(Block& blk, int64_t b, int64_t j0) const {
    blk.origin = j0;
    const int64_t diag_offset = p_.diagonal_offset(b);
    for (int r = 0; r < QR; ++r) {
      blk.lo[r] = float(blk.key_lo[r] - j0);
      blk.hi[r] = float(blk.key_hi[r] - j0);
      blk.pe[r] = float(blk.key_prefix[r] - j0);
      blk.diag[r] = float(blk.i[r] + diag_offset - j0);
    }
  }

  float* weights_row(int64_t b, const Block& blk, int r) const {
    return p_.weights + ((b * p_.Hq + blk.h[r]) * p_.Lq + blk.i[r]) * p_.Lk;
  }

  // Q rows of each block, transposed, [D][QR], so that Q·Kᵀ loads a vector of rows per d. Padding
  // rows are zeros. TB rows at a time by TB x TB transposes, then 4, then one by one.
  void load_query_rows(Workspace& ws, int64_t b, const Block* blocks, int n_blocks) const {
    const int64_t D = p_.D;
    if (D == 0) return;  // no Q block (its buffer is empty: no pointer arithmetic on null)
    for (int s = 0; s < n_blocks; ++s) {
      const Block& blk = blocks[s];
      float* qb = ws.qblock.data() + s * QR * D;
      auto row = [&](int r) { return p_.q + b * p_.qs.b + blk.h[r] * p_.qs.h + blk.i[r] * p_.qs.l; };
      int r = 0;
      auto rows_at_once = [&](auto n_tag) {
        constexpr int N = decltype(n_tag)::value;
        for (; r + N <= blk.n_rows && D >= N; r += N) {
          const float* src[N];
          for (int x = 0; x < N; ++x) src[x] = row(r + x);
          int64_t d = 0;
          for (; d + N <= D; d += N) {
            transpose_block<N>(src, qb + d * QR + r, QR);
            for (auto& x : src) x += N;
          }
          for (int x = 0; x < N; ++x)
            for (int64_t e = 0; d + e < D; ++e) qb[(d + e) * QR + r + x] = src[x][e];
        }
      };
      rows_at_once(std::integral_constant<int, TB>{});
      if (TB > 4) rows_at_once(std::integral_constant<int, 4>{});
      for (; r < QR; ++r) {
        const float* src = r < blk.n_rows ? row(r) : nullptr;
        for (int64_t d = 0; d < D; ++d) qb[d * QR + r] = src ? src[d] : 0.0f;
      }
    }
  }

  // ---------------------------------------------------------------- tile classification
  // (kernel/prefill_tiles.hpp): skip / full / mixed per (block, tile), and a mixed tile's
  // element-wise rules as bits in lanes.
  TileClass classify(Workspace& ws, int64_t b, const Block& blk, int64_t t) const;
  TileClass classify_segments(const Workspace& ws, int64_t b, const Block& blk, int64_t t) const;
  template <class T, class Open>
  TileClass classify_mask(const MaskView<T>& m, int64_t b, const Block& blk, int64_t t, Open&& open) const;
  void element_tiles(Workspace& ws, int64_t b, const Block& blk, int64_t t, bool masked, float* seen) const;
  uint64_t allowed_bits(int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n) const;

  // src [QR][cols] -> dst [cols][QR] (cols a multiple of TB).
  static void transpose_rows(const float* src, int64_t cols, float* dst) {
    for (int r = 0; r < QR; r += TB)
      for (int64_t c = 0; c < cols; c += TB) {
        const float* rows[TB];
        for (int x = 0; x < TB; ++x) rows[x] = src + (r + x) * cols + c;
        transpose_block<TB>(rows, dst + c * QR + r, QR);
      }
  }

  // ---------------------------------------------------------------- one key tile of one block

  template <int R>
  void key_tile(Workspace& ws, int64_t b, Block& blk, int s, int64_t t, TileClass cls) {
    (cls == TileClass::full ? ws.stats.tiles_full : ws.stats.tiles_mixed) += 1;
    const bool masked = cls == TileClass::mixed;
    const bool elementwise = masked && elementwise_;
    alignas(64) float tile_seen[QR];  // element-wise tiles: rows with some key allowed here
    if (elementwise || p_.bias) element_tiles(ws, b, blk, t, masked, tile_seen);
    float* state = ws.row_state.data() + s * 3 * QR;
    V m[R], l[R];
    M seen[R];
    for (int r = 0; r < R; ++r) {
      m[r] = S::load(state + r * W);
      l[r] = S::load(state + QR + r * W);
      seen[r] = S::load(state + 2 * QR + r * W) != S::splat(0.0f);
      if (!masked) seen[r] = seen[r] | (S::load(blk.act + r * W) != S::splat(0.0f));
      if (elementwise) seen[r] = seen[r] | (S::load(tile_seen + r * W) != S::splat(0.0f));
    }
    if constexpr (kCallsThroughOpaquePointers) {
      // A tile's groups kept a function of their own (base/compiler.hpp says why).
      static void (*volatile groups)(PrefillAttention*, Workspace&, int64_t, Block&, int64_t, int64_t, bool, V (&)[R], V (&)[R], M (&)[R]) =
          [](PrefillAttention* self, Workspace& ws_, int64_t b_, Block& blk_, int64_t s_, int64_t t_, bool masked_, V (&m_)[R], V (&l_)[R], M (&seen_)[R]) {
            self->tile_groups<R>(ws_, b_, blk_, s_, t_, masked_, m_, l_, seen_);
          };
      groups(this, ws, b, blk, s, t, masked, m, l, seen);
    } else {
      tile_groups<R>(ws, b, blk, s, t, masked, m, l, seen);
    }
    for (int r = 0; r < R; ++r) {
      S::store(state + r * W, m[r]);
      S::store(state + QR + r * W, l[r]);
      S::store(state + 2 * QR + r * W, S::select(seen[r], S::splat(1.0f), S::splat(0.0f)));
    }
  }

  // The groups of NK keys of block s over tile t, each through group_step.
  template <int R>
  MASKATTN_MICROTILE void tile_groups(Workspace& ws, int64_t b, Block& blk, int64_t s, int64_t t, bool masked, V (&m)[R], V (&l)[R], M (&seen)[R]) {
    const bool elementwise = masked && elementwise_;
    const bool guarded = masked && !v_finite(ws, t);  // NaN/inf V: masked keys must not reach P·V
    const int64_t j0 = t * KT;
    if ((masked || p_.alibi_slopes) && blk.origin != j0) rebase(blk, b, j0);
    // Keys computed: the whole tile when full; up to the last key an active row may attend when
    // mixed (no row attends past the key length, so K/V rows past it are never read).
    const int64_t n = masked ? std::min<int64_t>(KT, blk.key_end - j0) : KT;
    float* oT = ws.oacc.data() + s * QR * p_.Dv;
    const float* qb = ws.qblock.data() + s * QR * p_.D;
    for (int64_t g = 0; g * NK < n; ++g) {
      Group grp;
      grp.jg = j0 + g * NK;
      grp.nk = int(std::min<int64_t>(NK, n - g * NK));
      group_rows(ws, grp.jg, grp.nk, grp.k, grp.kst, grp.v, grp.vst);
      grp.qb = qb;
      grp.oT = oT;
      grp.blk = &blk;
      grp.b = b;
      grp.masked = masked;
      grp.guarded = guarded;
      grp.bits = elementwise ? ws.tile_bits.data() + (g * NK / 32) * QR : nullptr;
      grp.bit0 = int(g * NK % 32);
      grp.bias = p_.bias ? ws.bias_tile.data() + g * NK * QR : nullptr;
      grp.scratch = ws.scores.data();
      group_step<R>(grp, m, l, seen, blk.o_zero);
    }
  }

  // One group of NK keys for one block: where its rows are, and how the tile is masked.
  struct Group {
    const float *qb, *k, *v;
    int64_t kst, vst, jg, b;
    float* oT;
    const Block* blk;
    int nk;
    bool masked, guarded;
    const uint32_t* bits;  // the tile's element-wise rules (element_tiles): this group's word
    int bit0;              // and the bit of its first key
    const float* bias;
    float* scratch;  // [2][NK][QR]: allowed pairs (guarded P·V), weights
  };

  // Q·Kᵀ, logits and masks, the softmax and P·V of one group, its scores in registers throughout.
  template <int R>
  MASKATTN_MICROTILE void group_step(const Group& g, V (&m)[R], V (&l)[R], M (&seen)[R], bool& o_zero) const {
    V x[NK][R];
    qk_group<R>(g.qb, g.k, g.kst, x);
    logits_group<R>(x, *g.blk, g.jg, g.masked, g.bits, g.bit0, g.bias, seen, g.guarded ? g.scratch : nullptr);
    if (p_.weights) store_weights<R>(x, g.b, *g.blk, g.jg, g.nk, g.scratch + NK * QR);
    const bool first = o_zero;  // the block's first group: P·V stores Oᵀ instead of adding to it
    softmax_group<R>(x, m, l, g.oT, o_zero);
    if (g.guarded) pv_group_guarded<R>(g.oT, g.v, g.vst, x, g.scratch, first);
    else if (first) pv_group<R, true>(g.oT, g.v, g.vst, x);
    else pv_group<R, false>(g.oT, g.v, g.vst, x);
  }

  // The group steps (kernel/prefill_groups.hpp): Q·Kᵀ, logits and masks, weights, the softmax, P·V.
  template <int R>
  MASKATTN_MICROTILE void qk_group(const float* qb, const float* k, int64_t kst, V (&x)[NK][R]) const;
  template <int R>
  MASKATTN_MICROTILE void logits_group(V (&x)[NK][R], const Block& blk, int64_t jg, bool masked, const uint32_t* bits,
                                       int bit0, const float* bias, M (&seen)[R], float* allow_out) const;
  template <int R>
  void store_weights(const V (&x)[NK][R], int64_t b, const Block& blk, int64_t jg, int nk, float* buf) const;
  template <int R>
  MASKATTN_MICROTILE void softmax_group(V (&x)[NK][R], V (&m)[R], V (&l)[R], float* oT, bool& o_zero) const;
  template <int R, bool Init = false>
  MASKATTN_MICROTILE void pv_group(float* oT, const float* v, int64_t vst, const V (&p_in)[NK][R]) const;
  template <int R>
  void pv_group_guarded(float* oT, const float* v, int64_t vst, const V (&p)[NK][R], const float* allow, bool init) const;

  // ---------------------------------------------------------------- row results

  // Each row's lse and weights, then Oᵀ scaled lane by lane (1 / l, the sink's share) and turned
  // into output rows by 4x4 transposes. Rows that attended nothing get the sink's or the policy's
  // result instead (and their lanes of Oᵀ, which may hold nothing, are never read).
  void finish_block(Workspace& ws, int64_t b, const Block& blk, int s) {
    const float* state = ws.row_state.data() + s * 3 * QR;
    float* oT = ws.oacc.data() + s * QR * p_.Dv;
    const int64_t Dv = p_.Dv;
    alignas(64) float mul[QR];
    float* out[QR];
    bool any = false;
    // Without sinks, lse or weights a row's multiplier is 1 / l (row_scale's), computed lane-wise;
    // rows that attended nothing get 0.
    const bool lane_wise = !p_.sinks && !p_.lse && !p_.weights;
    if (lane_wise)
      for (int v = 0; v < RV; ++v) {
        const M seen = S::load(state + 2 * QR + v * W) != S::splat(0.0f);
        S::store(mul + v * W, S::select(seen, S::splat(1.0f) / S::load(state + QR + v * W), S::splat(0.0f)));
      }
    for (int r = 0; r < QR; ++r) {
      if (!lane_wise) mul[r] = 0.0f;
      out[r] = nullptr;
      if (r >= blk.n_rows) continue;
      const int64_t h = blk.h[r], i = blk.i[r];
      float* w = p_.weights ? weights_row(b, blk, r) : nullptr;
      if (state[2 * QR + r] == 0.0f) {  // no key allowed
        write_unattended_row(p_, b, h, i, w, [&]() -> const float* {
          if (!ws.mean_v_ready) mean_of_values(p_, ws.b, ws.hkv, ws.mean_v.data());
          ws.mean_v_ready = true;
          return ws.mean_v.data();
        });
        continue;
      }
      out[r] = p_.out + b * p_.os.b + h * p_.os.h + i * p_.os.l;
      any = true;
      if (lane_wise) continue;
      SoftmaxRow st;
      st.m = state[r];
      st.l = state[QR + r];
      st.has_key = true;
      const RowScale rs = row_scale(p_, h, st);
      mul[r] = rs.o_mul;
      if (p_.lse) p_.lse[(b * p_.Hq + h) * p_.Lq + i] = rs.m + std::log(rs.l);
      if (w) finish_weights_row<Arch>(w, p_.Lk, rs.m, rs.l);
    }
    if (!any) return;
    const int rv = row_vectors(blk.n_rows);  // the lanes the block's tier computed
    for (int64_t c = 0; c < Dv; ++c)
      for (int r = 0; r < rv; ++r) S::store(oT + c * QR + r * W, S::load(oT + c * QR + r * W) * S::load(mul + r * W));
    // N rows at equal distances in memory (one head's consecutive rows) are written by N x N
    // transposes (N = TB, then 4); the rest, and the last columns, one by one.
    int r = 0;
    auto rows_at_once = [&](auto n_tag) {
      constexpr int N = decltype(n_tag)::value;
      const int64_t cn = Dv / N * N;
      for (; r + N <= blk.n_rows; r += N) {
        bool equal = out[r] != nullptr;
        for (int x = 1; x < N && equal; ++x) equal = out[r + x] && out[r + x] - out[r + x - 1] == out[r + 1] - out[r];
        if (!equal) return;
        for (int64_t c = 0; c < cn; c += N) {
          const float* cols[N];
          for (int x = 0; x < N; ++x) cols[x] = oT + (c + x) * QR + r;
          transpose_block<N>(cols, out[r] + c, out[r + 1] - out[r]);
        }
        for (int x = r; x < r + N; ++x)
          for (int64_t e = cn; e < Dv; ++e) out[x][e] = oT[e * QR + x];
      }
    };
    while (r < blk.n_rows) {
      const int before = r;
      rows_at_once(std::integral_constant<int, TB>{});
      if (TB > 4) rows_at_once(std::integral_constant<int, 4>{});
      if (r == before) {  // a row that cannot go with its neighbours
        if (out[r])
          for (int64_t e = 0; e < Dv; ++e) out[r][e] = oT[e * QR + r];
        ++r;
      }
    }
  }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail

#include "kernel/prefill_groups.hpp"  // the group steps, defined out of the class
#include "kernel/prefill_tiles.hpp"   // tile classification and element-wise bits, likewise
