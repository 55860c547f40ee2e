// Integer dot products of the avx512vnni target: vpdpbusd on zmm, two blocks of 32 per instruction
// (unsigned x signed bytes: keys biased by +128; the pair's two scale products broadcast to the
// halves with one vpermps). P·V runs in integers a tile at a time (pv_tile, vpdpwssd on int16
// weight pairs; the AVX2/AVX-512F conversions dequantize V where a tile holds a non-finite value).
#pragma once

#include "kernel/int_dot/avx2_dequant.hpp"
#include "kernel/quant_dot.hpp"

#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// A query row with its block scales also laid out as the dot product's lanes take them: per pair
// of blocks (A, B), 16 floats [dA x8, dB x8] for q8 keys, or in the q4 pair order [dA x4, dB x4,
// dA x4, dB x4]. A key's pair then costs one vpermps for all the rows and one multiply per row,
// where building each row's scales took a load, a multiply and a vpermps.
struct PairScaledRow : QueryRow<int8_t> {
  using Base = QueryRow<int8_t>;
  const float* dpair = nullptr;
  static int64_t bytes(int64_t nb) { return Base::bytes(nb) + (nb + 1) / 2 * 64; }
  static PairScaledRow prepare(const uint8_t* q8row, int64_t D, int64_t nb, int32_t q8_offset, uint8_t* at,
                               bool q4_pairs = false) {
    PairScaledRow r;
    static_cast<Base&>(r) = Base::prepare(q8row, D, nb, q8_offset, at, q4_pairs);
    auto* p = reinterpret_cast<float*>(at + Base::bytes(nb));
    for (int64_t pair = 0; 2 * pair < nb; ++pair)
      for (int lane = 0; lane < 16; ++lane) {
        const int64_t blk = 2 * pair + (q4_pairs ? (lane / 4) % 2 : lane / 8);
        p[pair * 16 + lane] = blk < nb ? r.d[blk] : 0.0f;
      }
    r.dpair = p;
    return r;
  }
};

template <class Arch>
struct QuantDot : DequantAvx2<Arch> {
  // P·V: pv_tile below, not the generic integer path (kIntegerValues: per half block, with scalar
  // weight preparation, which measured 1.6x slower than dequantizing V here).
  static constexpr bool kIntegerValues = false;
  static constexpr bool kPvTile = true;
  using FArch = Arch;
  using FV = typename Simd<FArch>::V;
  using Row = PairScaledRow;
  static constexpr int32_t kQ8Offset = 128;  // keys biased to unsigned bytes: Σ (k + 128) q - 128 Σ q
  static constexpr bool kQ4PairOrder = true;  // QueryRow::prepare(..., q4_pairs)
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    __m512 acc[RB];  // in registers for the whole row (the caller's array would round-trip memory)
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    // Which block's scale each lane takes: q8 pairs are [A | B]; q4 pairs [A lo, B lo, A hi, B hi].
    const __m512i pair_lanes = Q4 ? _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0)
                                  : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    int64_t blk = 0;
    for (; blk + 2 <= nb; blk += 2) {
      __m512i kv;
      if constexpr (Q4) {  // 32 bytes = two blocks' nibbles: [A lo, B lo | A hi, B hi] in one go:
        // the bytes in both halves (one broadcast load), the upper half shifted, then masked
        const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + blk * 16)));
        kv = _mm512_and_si512(_mm512_mask_srli_epi16(x, __mmask32(0xFFFF0000u), x, 4), _mm512_set1_epi8(15));
      } else {
        kv = _mm512_xor_si512(_mm512_loadu_si512(k + blk * 32), _mm512_set1_epi8(char(0x80)));
      }
      const __m128 kd = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(kscales + blk)));
      const __m512 kd_lanes = _mm512_permutexvar_ps(pair_lanes, _mm512_castps128_ps512(kd));
      for (int r = 0; r < RB; ++r) {
        const int32_t* bias = (Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8;
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_loadu_si512(bias), kv, _mm512_loadu_si512(q[r]->q + blk * 32));
        const __m512 scale = _mm512_mul_ps(kd_lanes, _mm512_loadu_ps(q[r]->dpair + blk * 8));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, acc[r]);
      }
    }
    if (blk < nb) {  // an odd last block: the low half only
      const __m256i kv = Q4 ? q4_nibbles(k + blk * 16)
                            : _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + blk * 32)),
                                               _mm256_set1_epi8(char(0x80)));
      for (int r = 0; r < RB; ++r) {
        const int32_t* bias = (Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8;
        const __m256i sums = _mm256_dpbusd_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)), kv,
                                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[r]->q + blk * 32)));
        const __m512 x = _mm512_zextps256_ps512(_mm256_mul_ps(_mm256_cvtepi32_ps(sums),
                                                              _mm256_set1_ps(q[r]->d[blk] * kscales[blk])));
        acc[r] = _mm512_add_ps(x, acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = FV(acc[r]);
  }


  // Four blocks' scales of 16 rows with rows in lanes: x[b][j] = scales(j)[b], scales(j) the __m128
  // of row j's four. 16 loads, 12 lane inserts, 4 vpermt2ps and 4 vshuff32x4 (measured: vgatherdps,
  // one per 16 keys and block, cost a quarter of P·V).
  template <class ScalesOf>
  static void scales_in_lanes(ScalesOf scales, __m512 (&x)[4]) {
    __m512 t[4];  // t[i]: rows 4i .. 4i + 3, each row's 4 scales in a 128-bit lane
    for (int i = 0; i < 4; ++i) {
      __m512 y = _mm512_zextps128_ps512(scales(4 * i));
      y = _mm512_insertf32x4(y, scales(4 * i + 1), 1);
      y = _mm512_insertf32x4(y, scales(4 * i + 2), 2);
      t[i] = _mm512_insertf32x4(y, scales(4 * i + 3), 3);
    }
    // [scale 0 of rows 0-7, scale 1 of rows 0-7] and [2, 3] of rows 0-7 (a) and 8-15 (b).
    const __m512i pick01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i pick23 = _mm512_add_epi32(pick01, _mm512_set1_epi32(2));
    const __m512 a01 = _mm512_permutex2var_ps(t[0], pick01, t[1]), a23 = _mm512_permutex2var_ps(t[0], pick23, t[1]);
    const __m512 b01 = _mm512_permutex2var_ps(t[2], pick01, t[3]), b23 = _mm512_permutex2var_ps(t[2], pick23, t[3]);
    x[0] = _mm512_shuffle_f32x4(a01, b01, 0x44);
    x[1] = _mm512_shuffle_f32x4(a01, b01, 0xEE);
    x[2] = _mm512_shuffle_f32x4(a23, b23, 0x44);
    x[3] = _mm512_shuffle_f32x4(a23, b23, 0xEE);
  }

  // acc += a (unsigned bytes) · the 4 signed bytes at b in every lane, b broadcast by the instruction
  // itself ({1to16}: GCC 12 loads it with a separate vpbroadcastd from _mm512_set1_epi32; measured
  // 2% of the GQA q8 step).
  static __m512i dpbusd_broadcast(__m512i acc, __m512i a, const int8_t* b) {
#if defined(__GNUC__) && !defined(__clang__)
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*reinterpret_cast<const int32_t*>(b)));
    return acc;
#else
    int32_t x;
    std::memcpy(&x, b, 4);
    return _mm512_dpbusd_epi32(acc, a, _mm512_set1_epi32(x));
#endif
  }

  // A 16 x 16 transpose of int32: t[d] lane j = t[j] lane d before (64 in-lane and lane shuffles).
  static void transpose16(__m512i (&t)[16]) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; ++i) {
      a[2 * i] = _mm512_unpacklo_epi32(t[2 * i], t[2 * i + 1]);
      a[2 * i + 1] = _mm512_unpackhi_epi32(t[2 * i], t[2 * i + 1]);
    }
    // b[4i + k], 128-bit lane L: dword 4L + k of rows 4i .. 4i + 3
    for (int i = 0; i < 4; ++i) {
      b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
      b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
      b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
      b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int k = 0; k < 4; ++k) {  // the 4 x 4 transpose of 128-bit lanes of b[k], b[4 + k], b[8 + k], b[12 + k]
      const __m512i c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
      const __m512i c2 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44), c3 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
      t[k] = _mm512_shuffle_i32x4(c0, c2, 0x88);
      t[4 + k] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
      t[8 + k] = _mm512_shuffle_i32x4(c1, c3, 0x88);
      t[12 + k] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
    }
  }

  // ---------------------------------------------------------------- Q·Kᵀ, 16 keys in lanes
  //
  // s_r[j] = q_r · k_j for 16 keys j (kQkTile: the decode kernel's rows of a KV head group, 4 or 8 a
  // pass where it has 4 or more; 1 and 2 rows keep dot(), measured faster there). Per pair of
  // blocks each key's 64 bytes (q4: its 32 bytes of nibbles, unpacked as dot() does) are
  // transposed so that vector d holds dword d of all 16 keys; a row then takes 16 vpdpbusd against
  // its broadcast query dwords into two accumulators (one per block: exact block sums with keys in
  // lanes), and the block scales, with keys in lanes too, cost a convert, a multiply and an fma per
  // block and row for all 16 keys. Per key and row that is 2 vpdpbusd and 0.75 other instructions,
  // where dot() spends 8 and a lane reduction; the transposes (4 shuffles per key and pair, shared
  // by the rows) are what it costs instead.
  // k: the 16 keys' rows (repeated where the tile has fewer); s: row r's 16 scores at s + r·s_stride,
  // for the first n_store rows.
  static constexpr bool kQkTile[2] = {true, true};  // q8, q4
  template <int RB, bool Q4, int NB>  // NB: the block count when known at compile time (D = 128: 4), else 0
  static void qk_tile(const Row* const* q, const uint8_t* const* k, int64_t scales_at, int64_t nb_rt, float* s,
                      int64_t s_stride, int n_store) {
    const int64_t nb = NB ? NB : nb_rt;
    __m512 score[RB];
    for (int r = 0; r < RB; ++r) score[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < nb; g += 4) {
      const __mmask8 blocks = __mmask8((1u << std::min<int64_t>(4, nb - g)) - 1);
      __m512 ks[4];
      scales_in_lanes([&](int j) { return _mm_maskz_loadu_ps(blocks, reinterpret_cast<const float*>(k[j] + scales_at) + g); }, ks);
      for (int64_t blk = g; blk < std::min<int64_t>(g + 4, nb); blk += 2) {
        const bool two = blk + 1 < nb;
        __m512i t[16];
        for (int j = 0; j < 16; ++j) {
          if constexpr (Q4) {  // [A lo, B lo | A hi, B hi] as dot() and the query's pair order; one block: [lo | hi]
            if (two) {
              const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[j] + blk * 16)));
              t[j] = _mm512_and_si512(_mm512_mask_srli_epi16(x, __mmask32(0xFFFF0000u), x, 4), _mm512_set1_epi8(15));
            } else {
              t[j] = _mm512_zextsi256_si512(q4_nibbles(k[j] + blk * 16));
            }
          } else {
            const __m512i x = two ? _mm512_loadu_si512(k[j] + blk * 32)
                                  : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[j] + blk * 32)));
            t[j] = _mm512_xor_si512(x, _mm512_set1_epi8(char(0x80)));
          }
        }
        transpose16(t);
        const __m512 ka = ks[blk - g], kb = ks[std::min<int64_t>(blk + 1 - g, 3)];
        for (int r = 0; r < RB; ++r) {
          const int8_t* qb = q[r]->q + blk * 32;
          // The blocks' constant terms (-128 Σq for the biased q8 keys, -8 Σq for q4 nibbles).
          const int32_t* bias = Q4 ? q[r]->bias4 : q[r]->bias8;
          __m512i sa = _mm512_set1_epi32(bias[blk * 8]);
          __m512i sb = _mm512_set1_epi32(two ? bias[Q4 ? blk * 8 + 4 : (blk + 1) * 8] : 0);
          for (int d = 0; d < 8; ++d) {
            const int x = Q4 && two ? d % 4 + 8 * (d / 4) : d;
            sa = dpbusd_broadcast(sa, t[x], qb + 4 * x);
          }
          if (two)
            for (int d = 0; d < 8; ++d) {
              const int x = Q4 ? d % 4 + 4 + 8 * (d / 4) : 8 + d;
              sb = dpbusd_broadcast(sb, t[x], qb + 4 * x);
            }
          score[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sa), _mm512_mul_ps(ka, _mm512_set1_ps(q[r]->d[blk])), score[r]);
          if (two) score[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sb), _mm512_mul_ps(kb, _mm512_set1_ps(q[r]->d[blk + 1])), score[r]);
        }
      }
    }
    for (int r = 0; r < n_store; ++r) _mm512_storeu_ps(s + r * s_stride, score[r]);
  }


  // ---------------------------------------------------------------- P·V in integers
  //
  // o_r += Σ_j p_rj v̂_j over a tile's n <= 64 keys, for R rows, with V's q8 values or q4 nibbles as
  // int16 and each row's weights per block, w_j = p_j d_j (d_j the key's block scale), rounded to
  // int16 against their largest (unit = max / 32767): the bound of docs/semantics.md ("P·V in
  // integers"), the same as SIMD128's. Two keys' values interleaved as int16 pairs meet a pair of
  // weights in one vpdpwssd (16 columns x 2 keys, exact int32 sums: |Σ| <= 64 x 32767 x 127 < 2^31).
  // Per two keys and block of 32 columns, shared by the rows: q8 two 32-byte loads, two byte
  // unpacks and two sign extensions; q4 (two blocks at once) the same plus a mask and a shift per
  // output vector, its -8 folded into the sums (Σ w (n - 8) = Σ w n - 8 Σ w). Per row: one weight
  // broadcast and two vpdpwssd, where dequantizing costs 3 instructions and an fma per 16 columns.
  // The in-lane unpacks leave columns in the order [0-7, 16-23] and [8-15, 24-31]; one vshufi32x4
  // each restores it when a tile's sums are added to the output.
  // use: per row, which of the n keys it adds (nullptr: all). Returns false having written nothing
  // when a used key's scale or weight is not finite (NaN/inf in V or in the scores): the float path
  // then carries it.
  static constexpr int kPvMaxBlocks = 16;  // wider value rows take the float path
  // GCC 12 flags the intrinsics' own `__m512i __Y = __Y;` (their undefined-vector idiom) when these
  // functions inline them: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
  template <int R, bool Q4>
  static bool pv_tile(const float* const* prow, const uint64_t* use, float* const* orow, const uint8_t* v,
                      int64_t vs, int n, int64_t nb, int64_t ahead, int64_t row_bytes) {
    constexpr int64_t kValueBytes = Q4 ? 16 : 32;
    const int64_t scales_at = nb * kValueBytes;
    if (n <= 0) return true;
    if (nb > kPvMaxBlocks) return false;
    const int chunks = (n + 15) / 16;
    const uint64_t keys = n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1;
    uint64_t um[R], any = 0;
    for (int r = 0; r < R; ++r) any |= um[r] = use ? use[r] & keys : keys;
    constexpr int kNonFinite = 0x01 | 0x08 | 0x10 | 0x80;  // vfpclassps: QNaN, +inf, -inf, SNaN
    // The block scales of the tile's keys with keys in lanes, d[blk][j] (scales_in_lanes).
    alignas(64) float d[kPvMaxBlocks][64];
    for (int64_t g = 0; g < nb; g += 4) {
      const __mmask8 blocks = __mmask8((1u << std::min<int64_t>(4, nb - g)) - 1);
      auto scales = [&](int j) {  // keys past n repeat the last one (their weights are 0)
        return _mm_maskz_loadu_ps(blocks, v + std::min(j, n - 1) * vs + scales_at + 4 * g);
      };
      for (int c = 0; c < chunks; ++c) {
        __m512 x[4];
        scales_in_lanes([&](int i) { return scales(16 * c + i); }, x);
        const __mmask16 m = __mmask16(any >> (16 * c));
        for (int s = 0; s < 4 && g + s < nb; ++s) {
          if (_mm512_mask_fpclass_ps_mask(m, x[s], kNonFinite)) return false;
          // A key no row adds gets scale 0 (its own may be NaN: 0 x NaN would reach the weights).
          _mm512_store_ps(d[g + s] + 16 * c, _mm512_maskz_mov_ps(m, x[s]));
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < chunks; ++c) {
        const __mmask16 m = __mmask16(um[r] >> (16 * c));
        if (_mm512_mask_fpclass_ps_mask(m, _mm512_maskz_loadu_ps(m, prow[r] + 16 * c), kNonFinite)) return false;
      }
    // V rows a tile ahead are requested while this tile's are used: the next tile starts by reading
    // all its rows' scales, which a nearer distance leaves to wait on memory.
    const int64_t pf = 64;
    const PvTile t{um, prow, orow, v, vs, n, chunks, d, ahead, row_bytes, pf};
    // Blocks per pass: two accumulators per block and row, 16 in all; the tile's rows stay in L1
    // between passes.
    constexpr int PB = R == 1 ? 8 : R == 2 ? 4 : 2;
    for (int64_t b0 = 0; b0 < nb; b0 += PB) pv_pass_upto<R, Q4, PB>(int(std::min<int64_t>(PB, nb - b0)), t, b0);
    return true;
  }

 private:
  // acc += a · b in int16 pairs. GCC 12 copies vpdpwssd's accumulators between registers around
  // each use in these loops (two vmovdqa per vpdpwssd, measured in the GQA pass); the accumulator
  // tied in place by an asm operand keeps it where it is.
  static __m512i dpwssd(__m512i acc, __m512i a, __m512i b) {
#if defined(__GNUC__) && !defined(__clang__)
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
#else
    return _mm512_dpwssd_epi32(acc, a, b);
#endif
  }

  struct PvTile {
    const uint64_t* um;
    const float* const* prow;
    float* const* orow;
    const uint8_t* v;
    int64_t vs;
    int n, chunks;
    const float (*d)[64];
    int64_t ahead, row_bytes, pf;
  };
  // A pass of exactly pb blocks (compile-time, so the accumulators stay in registers).
  template <int R, bool Q4, int P>
  static void pv_pass_upto(int pb, const PvTile& t, int64_t b0) {
    if constexpr (P > 1)
      if (pb < P) return pv_pass_upto<R, Q4, P - 1>(pb, t, b0);
    pv_pass<R, Q4, P>(t, b0);
  }

  template <int R, bool Q4, int P>
  static void pv_pass(const PvTile& t, int64_t b0) {
    alignas(64) int16_t w[R][P][64];
    float unit[R][P];
    int32_t wsum[R][P];
    for (int bi = 0; bi < P; ++bi)
      for (int r = 0; r < R; ++r) {
        __m512 wf[4], amax = _mm512_setzero_ps();
        for (int c = 0; c < 4; ++c)
          if (c < t.chunks) {
            const __m512 p = _mm512_maskz_loadu_ps(__mmask16(t.um[r] >> (16 * c)), t.prow[r] + 16 * c);
            wf[c] = _mm512_mul_ps(p, _mm512_load_ps(t.d[b0 + bi] + 16 * c));
            amax = _mm512_max_ps(amax, _mm512_abs_ps(wf[c]));
          }
        const float mx = _mm512_reduce_max_ps(amax);
        unit[r][bi] = mx / 32767.0f;
        const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
        __m512i sum = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c)
          if (c < t.chunks) {  // lanes past n are 0: an odd last key's partner weighs nothing
            const __m512i wi = _mm512_cvtps_epi32(_mm512_mul_ps(wf[c], inv));
            sum = _mm512_add_epi32(sum, wi);
            _mm256_store_si256(reinterpret_cast<__m256i*>(w[r][bi] + 16 * c), _mm512_cvtepi32_epi16(wi));
          }
        wsum[r][bi] = Q4 ? _mm512_reduce_add_epi32(sum) : 0;
      }
    auto pair = [&](int r, int bi, int j) {
      int32_t x;
      std::memcpy(&x, w[r][bi] + j, 4);
      return x;
    };
    constexpr int kAcc = 2 * (P + P % 2);  // q4 takes blocks in pairs: an odd last block has a partner's room
    __m512i acc[R][kAcc];
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < kAcc; ++x) acc[r][x] = _mm512_setzero_si512();
    const uint8_t* v = t.v;
    const int64_t vs = t.vs;
    const int n = t.n;
    for (int j = 0; j < n; j += 2) {
      const uint8_t* a = v + j * vs;
      const uint8_t* b = j + 1 < n ? a + vs : a;  // the odd last key's partner: weight 0
      // The two rows a tile ahead, each row's own lines (measured against a loop over the bytes and
      // against five lines from the first row: equal or faster on MHA and GQA, q8 and q4, with K/V
      // from DRAM).
      if (b0 == 0 && j + t.pf + 1 < t.ahead)
        for (int k = 0; k < 2; ++k) prefetch_row(v + (j + t.pf + k) * vs, t.row_bytes);
      // Per pair of blocks (bi, bi + 1): four vectors x of (a, b) int16 pairs, 16 columns each,
      // block bi in the low 256 bits and bi + 1 in the high (an odd last block: the low half only).
      for (int bi = 0; bi < P; bi += 2) {
        const bool two = P % 2 == 0 || bi + 1 < P;
        __m512i x[4];
        if constexpr (Q4) {
          const uint8_t* at = a + (b0 + bi) * 16;
          const uint8_t* bt = b + (b0 + bi) * 16;
          const __m256i la = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at))
                                 : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
          const __m256i lb = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bt))
                                 : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bt)));
          // Words (a_i, b_i) of bytes i = 0-7 (z0) and 8-15 (z1) of both blocks: low nibbles are
          // columns i, high nibbles i + 16, block bi in lanes 0-7, bi + 1 in lanes 8-15.
          const __m512i z0 = _mm512_cvtepu8_epi16(_mm256_unpacklo_epi8(la, lb));
          const __m512i z1 = _mm512_cvtepu8_epi16(_mm256_unpackhi_epi8(la, lb));
          const __m512i low = _mm512_set1_epi16(15);
          x[0] = _mm512_and_si512(z0, low);
          x[1] = _mm512_and_si512(z1, low);
          x[2] = _mm512_srli_epi16(z0, 4);
          x[3] = _mm512_srli_epi16(z1, 4);
        } else {
          const uint8_t* at = a + (b0 + bi) * 32;
          const uint8_t* bt = b + (b0 + bi) * 32;
          const __m512i la = two ? _mm512_loadu_si512(at) : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
          const __m512i lb = two ? _mm512_loadu_si512(bt) : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bt)));
          // Byte pairs (a_i, b_i), each doubled ([a a b b]) and shifted right arithmetically by 8 in
          // words: sign-extended int16 pairs with in-lane instructions only. Per 128-bit lane (16
          // columns c of one block half): x0 c 0-3, x1 4-7, x2 8-11, x3 12-15; lanes 0-1 block bi,
          // lanes 2-3 block bi + 1.
          const __m512i ulo = _mm512_unpacklo_epi8(la, lb), uhi = _mm512_unpackhi_epi8(la, lb);
          x[0] = _mm512_srai_epi16(_mm512_unpacklo_epi8(ulo, ulo), 8);
          x[1] = _mm512_srai_epi16(_mm512_unpackhi_epi8(ulo, ulo), 8);
          x[2] = _mm512_srai_epi16(_mm512_unpacklo_epi8(uhi, uhi), 8);
          x[3] = _mm512_srai_epi16(_mm512_unpackhi_epi8(uhi, uhi), 8);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i wv = two ? _mm512_mask_set1_epi32(_mm512_set1_epi32(pair(r, bi, j)), __mmask16(0xFF00),
                                                          pair(r, bi + 1 < P ? bi + 1 : bi, j))
                                 : _mm512_set1_epi32(pair(r, bi, j));
          acc[r][2 * bi] = dpwssd(acc[r][2 * bi], x[0], wv);
          acc[r][2 * bi + 1] = dpwssd(acc[r][2 * bi + 1], x[1], wv);
          acc[r][2 * bi + 2] = dpwssd(acc[r][2 * bi + 2], x[2], wv);
          acc[r][2 * bi + 3] = dpwssd(acc[r][2 * bi + 3], x[3], wv);
        }
      }
    }
    // Columns back in order, the q4 offset, then o += unit x sums.
    auto add = [&](int r, int bi, __m512i lo, __m512i hi) {
      const __m512 u = _mm512_set1_ps(unit[r][bi]);
      float* out = t.orow[r] + (b0 + bi) * 32;
      if constexpr (Q4) {
        const __m512i off = _mm512_set1_epi32(8 * wsum[r][bi]);
        lo = _mm512_sub_epi32(lo, off);
        hi = _mm512_sub_epi32(hi, off);
      }
      _mm512_storeu_ps(out, _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), u, _mm512_loadu_ps(out)));
      _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), u, _mm512_loadu_ps(out + 16)));
    };
    for (int r = 0; r < R; ++r) {
      if constexpr (Q4) {
        for (int bi = 0; bi < P; bi += 2) {
          const __m512i* x = acc[r] + 2 * bi;  // [cols 0-7 | 0-7], [8-15 | 8-15], [16-23 | ..], [24-31 | ..]
          add(r, bi, _mm512_shuffle_i32x4(x[0], x[1], 0x44), _mm512_shuffle_i32x4(x[2], x[3], 0x44));
          if (bi + 1 < P) add(r, bi + 1, _mm512_shuffle_i32x4(x[0], x[1], 0xEE), _mm512_shuffle_i32x4(x[2], x[3], 0xEE));
        }
      } else {
        for (int bi = 0; bi < P; bi += 2) {
          const __m512i* x = acc[r] + 2 * bi;  // lanes [c, c + 16, block bi + 1: c, c + 16], c = 0, 4, 8, 12
          const __m512i even01 = _mm512_shuffle_i32x4(x[0], x[1], 0x88), even23 = _mm512_shuffle_i32x4(x[2], x[3], 0x88);
          const __m512i odd01 = _mm512_shuffle_i32x4(x[0], x[1], 0xDD), odd23 = _mm512_shuffle_i32x4(x[2], x[3], 0xDD);
          add(r, bi, _mm512_shuffle_i32x4(even01, even23, 0x88), _mm512_shuffle_i32x4(odd01, odd23, 0x88));
          if (bi + 1 < P) add(r, bi + 1, _mm512_shuffle_i32x4(even01, even23, 0xDD), _mm512_shuffle_i32x4(odd01, odd23, 0xDD));
        }
      }
    }
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
