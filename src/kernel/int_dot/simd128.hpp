// Integer dot products of the simd128 target (WebAssembly SIMD128, and the relaxed-SIMD build with
// the same file): i32x4.dot_i16x8_s on queries prepared as int16. The relaxed-SIMD build also has
// the relaxed 8-bit dot products (int_dot/simd128_relaxed.hpp), used where checks at module start and
// in the kernel's own code find them exact (Node 20's Liftoff gets
// i32x4.relaxed_dot_i8x16_i7x16_add_s wrong), this path elsewhere. P·V runs in integers (PV below;
// a tile holding a non-finite V scale or weight dequantizes V in registers instead).
#pragma once

#include "kernel/quant_dot.hpp"

#include <wasm_simd128.h>

#include <cstring>

#if defined(__wasm_relaxed_simd__)
#include "kernel/int_dot/simd128_relaxed.hpp"
#endif

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <class Arch>
struct DequantWasm {
  using V = typename Simd<Arch>::V;
  static V f(v128_t x) { return V(__m128(wasm_f32x4_convert_i32x4(x))); }
  static void widen(v128_t b, V* out) {
    const v128_t lo = wasm_i16x8_extend_low_i8x16(b), hi = wasm_i16x8_extend_high_i8x16(b);
    out[0] = f(wasm_i32x4_extend_low_i16x8(lo));
    out[1] = f(wasm_i32x4_extend_high_i16x8(lo));
    out[2] = f(wasm_i32x4_extend_low_i16x8(hi));
    out[3] = f(wasm_i32x4_extend_high_i16x8(hi));
  }
  static void q8(const uint8_t* p, V* out) { widen(wasm_v128_load(p), out); }
  static void q4(const uint8_t* p, V* lo, V* hi) {
    const v128_t b = wasm_v128_load(p), eight = wasm_i8x16_splat(8);
    // Nibble - 8 as signed bytes, then widened like q8.
    widen(wasm_i8x16_sub(wasm_v128_and(b, wasm_i8x16_splat(15)), eight), lo);
    widen(wasm_i8x16_sub(wasm_u8x16_shr(b, 4), eight), hi);
  }
  // Only the half a 16-column pass needs (SIMD128 passes are 16 columns wide).
  static void q4_half(const uint8_t* p, int half, V* out) {
    const v128_t b = wasm_v128_load(p);
    const v128_t n = half == 0 ? wasm_v128_and(b, wasm_i8x16_splat(15)) : wasm_u8x16_shr(b, 4);
    widen(wasm_i8x16_sub(n, wasm_i8x16_splat(8)), out);
  }
};

// A key block widened to int16 once for every row (BlockDot128 in kernel/quant_dot.hpp runs the loop).
template <class Arch>
struct Simd128Ops {
  using FV = typename Simd<Arch>::V;
#if defined(__wasm_relaxed_simd__)
  using Row = WithInt8Values<QueryRow<int16_t>>;  // int8 values too, for the relaxed path
#else
  using Row = QueryRow<int16_t>;
#endif
  using IV = v128_t;
  struct KBlock { v128_t w[4]; };  // the 32 values as int16
  static IV bias(const int32_t* p) { return wasm_v128_load(p); }
  static IV zero() { return wasm_i32x4_splat(0); }
  static KBlock prep_q8(const uint8_t* k) {
    KBlock b;
    for (int h = 0; h < 2; ++h) {
      const v128_t x = wasm_v128_load(k + 16 * h);
      b.w[2 * h] = wasm_i16x8_extend_low_i8x16(x);
      b.w[2 * h + 1] = wasm_i16x8_extend_high_i8x16(x);
    }
    return b;
  }
  static KBlock prep_q4(const uint8_t* k) {
    const v128_t x = wasm_v128_load(k);
    const v128_t lo = wasm_v128_and(x, wasm_i8x16_splat(15)), hi = wasm_u8x16_shr(x, 4);
    return {{wasm_u16x8_extend_low_u8x16(lo), wasm_u16x8_extend_high_u8x16(lo), wasm_u16x8_extend_low_u8x16(hi),
             wasm_u16x8_extend_high_u8x16(hi)}};
  }
  static IV apply(const int16_t* q, const KBlock& b, IV acc) {
    for (int i = 0; i < 4; ++i) acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_load(q + 8 * i), b.w[i]));
    return acc;
  }
  static FV to_float(IV x) { return FV(__m128(wasm_f32x4_convert_i32x4(x))); }

  // P·V in integers (measured: dequantizing V in registers made P·V slower than float32 V here;
  // SIMD128 has no float conversion short of 10 instructions per 16 values). The weights p_j x
  // scale_j of a block are rounded to int16 against their largest, and two keys' values, interleaved
  // as int16 pairs, meet a pair of weights in one i32x4.dot_i16x8_s: 4 columns x 2 keys.
  static constexpr bool kIntegerValues = true;
  struct PV {
  using FArch = Arch;
  using IV = v128_t;
  static constexpr int kLanes = 4;  // columns per vector
  // 16 values (one half block) of keys a and b as 4 vectors of (a, b) int16 pairs, columns 4c..4c+3.
  static void pairs(v128_t a, v128_t b, v128_t* out) {
    const v128_t lo = wasm_i8x16_shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const v128_t hi = wasm_i8x16_shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    out[0] = wasm_i16x8_extend_low_i8x16(lo);
    out[1] = wasm_i16x8_extend_high_i8x16(lo);
    out[2] = wasm_i16x8_extend_low_i8x16(hi);
    out[3] = wasm_i16x8_extend_high_i8x16(hi);
  }
  static void pairs_q8(const uint8_t* a, const uint8_t* b, v128_t* out) { pairs(wasm_v128_load(a), wasm_v128_load(b), out); }
  // The `half` nibbles of two q4 blocks' 16 bytes, minus 8.
  static void pairs_q4(const uint8_t* a, const uint8_t* b, int half, v128_t* out) {
    auto nib = [half](const uint8_t* p) {
      const v128_t x = wasm_v128_load(p);
      return wasm_i8x16_sub(half ? wasm_u8x16_shr(x, 4) : wasm_v128_and(x, wasm_i8x16_splat(15)), wasm_i8x16_splat(8));
    };
    pairs(nib(a), nib(b), out);
  }
  // The block scales of a tile's n keys, keys in lanes: d[blk * stride + j] = scale blk of key j
  // (key j's scales at sc + j * vs), 0 for a key no row adds (`used`; its scale may be NaN). Four
  // blocks per load, a lane store each (measured: a scalar load and store per scale was 40% of
  // P·V once the weights were cheap). A non-finite scale of a used key needs no check here: its
  // products p_j d_j are not finite (0 x inf is NaN), and weights() reports that.
  static void tile_scales(const uint8_t* sc, int64_t vs, int n, int64_t nb, const bool* used, float* d, int stride) {
    const int64_t nb4 = nb / 4 * 4;
    for (int j = 0; j < n; ++j) {
      const uint8_t* row = sc + j * vs;
      const v128_t keep = wasm_i32x4_splat(used[j] ? -1 : 0);
      for (int64_t b = 0; b < nb4; b += 4) {
        const v128_t x = wasm_v128_and(wasm_v128_load(row + 4 * b), keep);
        float* at = d + b * stride + j;
        wasm_v128_store32_lane(at, x, 0);
        wasm_v128_store32_lane(at + stride, x, 1);
        wasm_v128_store32_lane(at + 2 * stride, x, 2);
        wasm_v128_store32_lane(at + 3 * stride, x, 3);
      }
      for (int64_t b = nb4; b < nb; ++b) {
        float x = 0.0f;
        if (used[j]) std::memcpy(&x, row + 4 * b, 4);
        d[b * stride + j] = x;
      }
    }
  }
  // A row's weights for one block: w_j = round(p_j d_j / unit), unit = max_j |p_j d_j| / 32767, for
  // the n keys (a multiple of kWeightStep, zeros past the tile); returns unit (not finite when a
  // weight is not: the caller takes the float path then).
  static constexpr int kWeightStep = 8;
  static float weights(const float* p, const float* d, int n, int16_t* w) {
    // The largest |p_j d_j| as the integer max of the magnitudes' bits: non-negative floats order
    // like their bit patterns, infinity and NaN above every finite value (one pmaxsd in V8, where
    // f32x4.max costs eight instructions for its NaN rule).
    const v128_t magnitude = wasm_i32x4_splat(0x7fffffff);
    v128_t mx = wasm_i32x4_splat(0);
    for (int j = 0; j < n; j += 4)
      mx = wasm_i32x4_max(mx, wasm_v128_and(wasm_f32x4_mul(wasm_v128_load(p + j), wasm_v128_load(d + j)), magnitude));
    mx = wasm_i32x4_max(mx, wasm_i32x4_shuffle(mx, mx, 2, 3, 0, 1));
    mx = wasm_i32x4_max(mx, wasm_i32x4_shuffle(mx, mx, 1, 0, 3, 2));
    const float m = wasm_f32x4_extract_lane(mx, 0);
    if (!(m <= 3.4028234663852886e38f)) return m;  // an infinite or NaN product
    const v128_t inv = wasm_f32x4_splat(m > 0.0f ? 32767.0f / m : 0.0f);
    // Rounded to the nearest integer (ties to even, as f32x4.nearest) by adding 1.5 x 2^23: the
    // sum's low mantissa bits are the integer (|x| <= 32767 < 2^22), its bits minus the constant's
    // the int32 (f32x4.nearest and i32x4.trunc_sat_f32x4_s cost V8 about ten instructions).
    const v128_t magic = wasm_f32x4_splat(12582912.0f);
    auto word = [&](int j) {
      const v128_t x = wasm_f32x4_mul(wasm_f32x4_mul(wasm_v128_load(p + j), wasm_v128_load(d + j)), inv);
      return wasm_i32x4_sub(wasm_f32x4_add(x, magic), magic);
    };
    for (int j = 0; j < n; j += 8) wasm_v128_store(w + j, wasm_i16x8_narrow_i32x4(word(j), word(j + 4)));
    return m / 32767.0f;
  }
  // The weights of keys j and j + 1 (w at j: two adjacent int16) in every 32-bit lane, one load.
  static v128_t weight_pair(const int16_t* w) { return wasm_v128_load32_splat(w); }
  static v128_t zero() { return wasm_i32x4_splat(0); }
  static v128_t madd(v128_t pairs, v128_t w, v128_t acc) { return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(pairs, w)); }
  static FV to_float(IV x) { return FV(__m128(wasm_f32x4_convert_i32x4(x))); }
  };
};

#if defined(__wasm_relaxed_simd__)
// The relaxed build's check before each use, in the code about to use it (quant_dot.hpp).
__attribute__((always_inline)) inline void quant_dot_check_here() { RelaxedIntDot::check_here(); }
#endif

template <class Arch>
struct QuantDot : DequantWasm<Arch>, BlockDot128<Arch, Simd128Ops<Arch>> {
#if !defined(__wasm_relaxed_simd__)
  // Q·Kᵀ for 4 keys at a time with keys in lanes (kQkTile: the decode kernel's groups of 4 or more
  // rows), as the x86 targets' qk_tile: per half block the keys' values widened to int16 and their
  // (pairs of) int16 transposed (8 shuffles per 4 keys and 8 pairs), then per pair and row one
  // broadcast query pair, i32x4.dot_i16x8_s and an add into exact block sums; the block scales cost a
  // convert, a multiply and an add per block and 4 keys. (The relaxed builds keep dot(): its relaxed
  // 8-bit products there.)
  // q4 keys only: q8 keys measured 10% slower this way in Node 20 (GQA step, alternated builds),
  // q4 6-7% faster.
  static constexpr bool kQkTile[2] = {false, true};  // q8, q4
  using Row = typename BlockDot128<Arch, Simd128Ops<Arch>>::Row;
  template <int RB, bool Q4, int NB>
  static void qk_tile(const Row* const* q, const uint8_t* const* k, int64_t scales_at, int64_t nb_rt, float* s,
                      int64_t s_stride, int n_store) {
    const int64_t nb = NB ? NB : nb_rt;
    v128_t score[RB];
    for (int r = 0; r < RB; ++r) score[r] = wasm_f32x4_splat(0.0f);
    for (int64_t blk = 0; blk < nb; ++blk) {
      v128_t acc[RB];
      for (int r = 0; r < RB; ++r) acc[r] = wasm_i32x4_splat(Q4 ? q[r]->bias4[blk * 8] : 0);
      for (int h = 0; h < 2; ++h) {
        v128_t lo[4], hi[4];
        for (int j = 0; j < 4; ++j) {
          if constexpr (Q4) {
            const v128_t b = wasm_v128_load(k[j] + blk * 16);
            const v128_t x = h ? wasm_u8x16_shr(b, 4) : wasm_v128_and(b, wasm_i8x16_splat(15));
            lo[j] = wasm_u16x8_extend_low_u8x16(x);
            hi[j] = wasm_u16x8_extend_high_u8x16(x);
          } else {
            const v128_t x = wasm_v128_load(k[j] + blk * 32 + 16 * h);
            lo[j] = wasm_i16x8_extend_low_i8x16(x);
            hi[j] = wasm_i16x8_extend_high_i8x16(x);
          }
        }
        v128_t t[8];  // t[p] lane j: key j's int16 pair p of this half block
        transpose4(lo, t);
        transpose4(hi, t + 4);
        for (int r = 0; r < RB; ++r) {
          const int16_t* qp = q[r]->q + blk * 32 + 16 * h;
          for (int p = 0; p < 8; ++p) acc[r] = wasm_i32x4_add(acc[r], wasm_i32x4_dot_i16x8(t[p], wasm_v128_load32_splat(qp + 2 * p)));
        }
      }
      auto scale = [&](int j) { float x; std::memcpy(&x, k[j] + scales_at + 4 * blk, 4); return x; };
      const v128_t kd = wasm_f32x4_make(scale(0), scale(1), scale(2), scale(3));
      for (int r = 0; r < RB; ++r)
        score[r] = wasm_f32x4_add(score[r], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(acc[r]),
                                                           wasm_f32x4_mul(kd, wasm_f32x4_splat(q[r]->d[blk]))));
    }
    for (int r = 0; r < n_store; ++r) wasm_v128_store(s + r * s_stride, score[r]);
  }

 private:
  // A 4 x 4 transpose of 32-bit lanes: out[d] lane j = v[j] lane d.
  static void transpose4(const v128_t* v, v128_t* out) {
    const v128_t a0 = wasm_i32x4_shuffle(v[0], v[1], 0, 4, 1, 5), a1 = wasm_i32x4_shuffle(v[0], v[1], 2, 6, 3, 7);
    const v128_t a2 = wasm_i32x4_shuffle(v[2], v[3], 0, 4, 1, 5), a3 = wasm_i32x4_shuffle(v[2], v[3], 2, 6, 3, 7);
    out[0] = wasm_i64x2_shuffle(a0, a2, 0, 2);
    out[1] = wasm_i64x2_shuffle(a0, a2, 1, 3);
    out[2] = wasm_i64x2_shuffle(a1, a3, 0, 2);
    out[3] = wasm_i64x2_shuffle(a1, a3, 1, 3);
  }

 public:
#endif
#if defined(__wasm_relaxed_simd__)
  using Exact = BlockDot128<Arch, Simd128Ops<Arch>>;
  using Row = typename Exact::Row;
  using FV = typename Exact::FV;
  // The forms (quant_dot.hpp, HasForms): the mode checked by quant_dot_check_here()
  // (int_dot/simd128_relaxed.hpp), read once per tile of keys, else the exact path.
  static constexpr bool kForms = true;
  template <bool Q4, class F>
  MASKATTN_ALWAYS_INLINE static void with_form(F&& f) {
    using M = RelaxedIntDot;
    const M::Mode m = M::mode();
    if (m == M::i8x16_add) f(std::integral_constant<int, M::i8x16_add>{});
    // q4 keys only: q8 keys ran 7-11% slower on it than on the exact path (Node 20)
    else if (Q4 && m == M::i16x8) f(std::integral_constant<int, M::i16x8>{});
    else f(std::integral_constant<int, M::exact>{});
  }
  template <int RB, bool Q4, int Form>
  static void dot_form(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    constexpr auto M = RelaxedIntDot::Mode(Form);
    if constexpr (M == RelaxedIntDot::i8x16_add || (M == RelaxedIntDot::i16x8 && Q4))
      RelaxedIntDot::dot<Simd<Arch>, M, RB, Q4>(q, k, kscales, nb, out, stride);
    else
      Exact::template dot<RB, Q4>(q, k, kscales, nb, out, stride);
  }
#endif
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
