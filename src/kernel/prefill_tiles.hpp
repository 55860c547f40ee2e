// Tile setup, tile classification and a mixed tile's element-wise rules for the prefill kernel
// (kernel/prefill_kernel.hpp): a (b, kv head)'s tile slots and converted rows; whether a (block,
// key tile) pair is skipped, full or mixed, and in a mixed tile which (row, key) pairs the
// element-wise rules allow, as bits in the lanes' layout. Out of the class only to keep each file
// short. Included by prefill_kernel.hpp alone, after the class.
#pragma once

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// Per (b, kv head): a ring whose window has moved past its sink tokens maps its tiles to slots
// (tile_slot); the key segments' range per held tile.
template <class Arch>
inline void PrefillAttention<Arch>::prepare(Workspace& ws, int64_t b, int64_t hkv) {
  std::fill(ws.tile_flags.begin(), ws.tile_flags.begin() + tiles_, uint8_t(0));
  ws.b = b;
  ws.hkv = hkv;
  ws.mean_v_ready = false;
  sink_tiles_ = window_tile_ = 0;
  const int64_t klen = p_.key_length(b);
  if (p_.kv.ring && p_.kv.first[b] > p_.kv.sink_tokens) {  // the window moved past the sink tokens
    sink_tiles_ = (p_.kv.sink_tokens + KT - 1) / KT;
    window_tile_ = std::max(sink_tiles_, int64_t(p_.kv.first[b]) / KT);
  }
  if (p_.key_segments) {
    const int32_t* seg = p_.key_segments + b * p_.Lk;
    auto tiles = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j0 = t * KT, j1 = std::min(j0 + KT, p_.Lk);
        int32_t lo = seg[j0], hi = seg[j0];
        for (int64_t j = j0 + 1; j < j1; ++j) { lo = std::min(lo, seg[j]); hi = std::max(hi, seg[j]); }
        ws.seg_min[tile_slot(t)] = lo;
        ws.seg_max[tile_slot(t)] = hi;
      }
    };
    const int64_t held_end = std::min(tiles_ - sink_tiles_ + window_tile_, (klen + KT - 1) / KT);
    tiles(0, std::min(sink_tiles_, held_end));
    tiles(std::max(sink_tiles_, window_tile_), held_end);
  }
}

// Tile t's K and/or V rows as float rows in its slot (a cache of another dtype).
template <class Arch>
inline void PrefillAttention<Arch>::convert_tile(Workspace& ws, int64_t t) {
  const int64_t j0 = t * KT, slot = tile_slot(t);
  const int64_t n = std::max<int64_t>(0, std::min<int64_t>(KT, p_.key_length(ws.b) - j0));
  if (!k_direct_) {
    float* kt = ws.ktiles.data() + slot * KT * p_.D;
    for (int64_t j = 0; j < n; ++j)
      row_to_float(p_.kv.k_type, p_.kv.key_row(ws.b, ws.hkv, j0 + j), p_.D, p_.kv.keys_rotated, kt + j * p_.D);
    std::fill(kt + n * p_.D, kt + KT * p_.D, 0.0f);
  }
  if (!v_direct_) {
    float* vt = ws.vtiles.data() + slot * KT * p_.Dv;
    for (int64_t j = 0; j < n; ++j) row_to_float(p_.kv.v_type, p_.kv.value_row(ws.b, ws.hkv, j0 + j), p_.Dv, false, vt + j * p_.Dv);
    std::fill(vt + n * p_.Dv, vt + KT * p_.Dv, 0.0f);
  }
  ws.tile_flags[slot] |= kConverted;
}

template <class Arch>
inline TileClass PrefillAttention<Arch>::classify(Workspace& ws, int64_t b, const Block& blk, int64_t t) const {
  const int64_t j0 = t * KT, j1 = j0 + KT;
  bool all_cover = true, all_miss = true;
  for (int r = 0; r < blk.n_rows; ++r) {
    if (!blk.active[r]) continue;
    const RowKeys keys = blk.keys(r);
    all_cover = all_cover && keys.covers(j0, j1);
    all_miss = all_miss && keys.misses(j0, j1);
  }
  if (all_miss) return TileClass::skip;
  TileClass cls = all_cover ? TileClass::full : TileClass::mixed;
  if (p_.query_segments) cls = combine(cls, classify_segments(ws, b, blk, t));
  if (cls != TileClass::skip && p_.allowed) cls = combine(cls, classify_mask(p_.allowed, b, blk, t, [](uint8_t a) { return a != 0; }));
  if (cls != TileClass::skip && p_.bias) cls = combine(cls, classify_mask(p_.bias, b, blk, t, [](float x) { return x != kNegInf; }));
  if (cls == TileClass::full && p_.tree_parents) {  // tree keys: each row sees only its ancestors
    const int64_t t0 = p_.tree_start(b);
    if ((t + 1) * KT > t0 && t * KT < t0 + p_.Lq) cls = TileClass::mixed;
  }
  return cls;
}

template <class Arch>
inline TileClass PrefillAttention<Arch>::classify_segments(const Workspace& ws, int64_t b, const Block& blk, int64_t t) const {
  const int32_t lo = ws.seg_min[tile_slot(t)], hi = ws.seg_max[tile_slot(t)];
  bool all_equal = lo == hi, none = true;
  for (int r = 0; r < blk.n_rows; ++r) {
    if (!blk.active[r]) continue;
    const int32_t sq = p_.query_segments[b * p_.Lq + blk.i[r]];
    all_equal = all_equal && sq == lo;
    none = none && (sq < lo || sq > hi);
  }
  return none ? TileClass::skip : all_equal ? TileClass::full : TileClass::mixed;
}

// skip / full / mixed of an `allowed` or `bias` mask over the tile's keys, for the active rows.
template <class Arch>
template <class T, class Open>
inline TileClass PrefillAttention<Arch>::classify_mask(const MaskView<T>& m, int64_t b, const Block& blk, int64_t t, Open&& open) const {
  const int64_t j0 = t * KT, n = std::min<int64_t>(KT, p_.Lk - j0);
  const int64_t step = m.strides[3];
  bool any_on = false, any_off = n < KT;
  for (int r = 0; r < blk.n_rows; ++r) {
    if (!blk.active[r]) continue;
    const T* row = mask_row(m, b, blk.h[r], blk.i[r]) + j0 * step;
    if constexpr (std::is_same_v<T, uint8_t>) {  // bytes: 16 or more at a time
      if (step) {
        const uint64_t on = nonzero_byte_bits(row, n);
        any_on |= on != 0;
        any_off |= on != range_bits(0, n);
        if (any_on && any_off) return TileClass::mixed;
        continue;
      }
    }
    for (int64_t j = 0; j < (step ? n : 1); ++j) {
      const bool on = open(row[j]);
      any_on |= on;
      any_off |= !on;
    }
    if (any_on && any_off) return TileClass::mixed;
  }
  return !any_on ? TileClass::skip : any_off ? TileClass::mixed : TileClass::full;
}

// The element-wise rules of the block's rows over tile t, as bits in the lanes' layout:
// ws.tile_bits [KT / 32][QR], bit j % 32 of word [j / 32][r] set when row r may attend key j0 + j
// (a group then masks a vector with one bit test). A boolean mask alone goes from its bytes
// straight to bits (nonzero_byte_bits); other rules through a row of 1/0 floats (element_row).
// In a mixed tile the rows' key intervals are folded in too, and `seen` gets each row's "some key
// here is allowed". With a bias, its values: ws.bias_tile [KT][QR], turned by TB x TB transposes.
template <class Arch>
inline void PrefillAttention<Arch>::element_tiles(Workspace& ws, int64_t b, const Block& blk, int64_t t, bool masked, float* seen) const {
  static_assert(KT % 32 == 0 && KT <= 64, "a row's tile bits are one 64-bit word");
  const int64_t j0 = t * KT, n = std::min<int64_t>(KT, p_.Lk - j0);
  const bool bits_wanted = masked && elementwise_;
  const bool bytes_only = p_.allowed && !p_.bias && !p_.query_segments && !p_.tree_parents;
  float* bias_rows = ws.scores.data();  // [QR][KT]
  float* valid_row = bias_rows + QR * KT;
  for (int r = 0; r < QR; ++r) {
    uint64_t bits = 0;
    if (!blk.active[r]) {
      if (p_.bias) std::fill_n(bias_rows + r * KT, KT, 0.0f);
    } else if (bytes_only) {
      if (bits_wanted) bits = allowed_bits(b, blk.h[r], blk.i[r], j0, n);
    } else {
      logits_.element_row(b, blk.h[r], blk.i[r], j0, n, KT, valid_row, bias_rows + r * KT);
      for (int c = 0; bits_wanted && c < KT; c += W)
        bits |= uint64_t(S::lane_bits(S::load(valid_row + c) != S::splat(0.0f))) << c;
    }
    if (bits_wanted) {
      const RowKeys keys = blk.keys(r);
      if (bits && !keys.covers(j0, j0 + KT))
        bits &= range_bits(keys.lo - j0, keys.hi - j0) | range_bits(0, keys.prefix_end - j0);
      for (int w = 0; w < KT / 32; ++w) ws.tile_bits[w * QR + r] = uint32_t(bits >> (32 * w));
    }
    seen[r] = bits ? 1.0f : 0.0f;
  }
  if (p_.bias) transpose_rows(bias_rows, KT, ws.bias_tile.data());
}

// Row i's boolean mask over keys [j0, j0 + n) as bits.
template <class Arch>
inline uint64_t PrefillAttention<Arch>::allowed_bits(int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n) const {
  const uint8_t* a = mask_row(p_.allowed, b, h, i);
  if (p_.allowed.strides[3] == 1) return nonzero_byte_bits(a + j0, n);
  return a[0] ? range_bits(0, n) : 0;  // broadcast over keys
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
