// Integer dot products and in-register dequantization for the quantized KV caches: the escape hatch
// of the decode kernel's q8/q4 paths, so the kernel itself stays one source (kernel/decode_kernel.hpp
// calls only QuantDot<Arch>). This header holds what every instruction set shares; each one's
// QuantDot is a file of kernel/int_dot/ named by instruction set, and the translation unit of a
// target includes the one its row of the target table names (src/include/maskattn/targets.inc,
// column int_dot; src/dispatch/kernel.cpp.in defines MASKATTN_INT_DOT to it).
//
// Q·Kᵀ: each query row is quantized per block of 32 like a q8 key (kernel/quant.hpp), and a block's
// dot product is an exact integer sum (|sum| <= 32 * 127 * 127 < 2^24, so exact in float too):
//   q8 keys  s += dq * dk * Σ q_i k_i
//   q4 keys  s += dq * dk * (Σ q_i n_i - 8 Σ q_i)      (n_i the stored nibble, k_i = n_i - 8)
// The constant terms (-8 Σq, and -128 Σq where keys are biased to unsigned bytes) are precomputed
// per query block as an integer vector added to the partial sums, so a block costs the instructions
// its int_dot file names at its top and nothing else.
// Each partial-sum vector is converted to float and accumulated with the block's scale product; a
// key's blocks are loaded once for all the rows of a register block, and several (row, key) pairs
// are folded at the end with one Simd<FArch>::reduce_lanes.
//
// P·V dequantizes in registers: 16 stored values at a time become 16 / W float vectors, which the
// kernel multiplies by p_j x scale; the scale is folded into the probability, not the values (or,
// where an int_dot file says kIntegerValues, runs in integers through its PV, or where it says
// kPvTile, through its own pv_tile for a whole tile of keys).
//
// A new instruction set is one file in kernel/int_dot/ defining QuantDot<Arch> (the interface of
// QuantDotScalar below; a 128-bit one supplies BlockDot128's Ops) and its name in its target row.
// Optionally it also defines kQkTile[q8, q4] and qk_tile<RB, Q4, NB>: Q·Kᵀ for as many keys as its
// float lanes at once with keys in lanes, which the decode kernel then uses for groups of 4+ rows
// (avx512vnni: 16 keys, avx2: 8, simd128: 4, q4 keys only).
#pragma once

#include "base/arch_namespace.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel/quant.hpp"
#include "kernel/simd.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// A query row quantized per block of 32 (the q8 rule), in the layout its QuantDot reads: values
// (int8, or int16 where the dot product widens), the block scales, and per block 8 int32 lanes of
// the constant terms for q8 and q4 keys (the value in lane 0, or lanes 0 and 8 for a zmm pair).
template <class QElem>
struct QueryRow {
  const QElem* q = nullptr;
  const float* d = nullptr;
  const int32_t* bias8 = nullptr;
  const int32_t* bias4 = nullptr;

  static int64_t bytes(int64_t nb) { return nb * (32 * int64_t(sizeof(QElem)) + 4 + 64); }
  // Lays the row out at `at` (bytes(nb) bytes, 4-byte aligned) from a q8 row (kernel/quant.hpp).
  // q4_pairs: each pair of blocks (A, B) in the order q4 keys load into a zmm, [A 0-15, B 0-15,
  // A 16-31, B 16-31], with the q4 constants in lanes 0 (A) and 4 (B): AVX-512 VNNI then takes two
  // blocks of nibbles with one load, shift and mask instead of rebuilding the element order.
  static QueryRow prepare(const uint8_t* q8row, int64_t D, int64_t nb, int32_t q8_offset, uint8_t* at,
                          bool q4_pairs = false) {
    QueryRow r;
    auto* q = reinterpret_cast<QElem*>(at);
    auto* d = reinterpret_cast<float*>(at + nb * 32 * int64_t(sizeof(QElem)));
    auto* b8 = reinterpret_cast<int32_t*>(d + nb);
    int32_t* b4 = b8 + nb * 8;
    for (int64_t blk = 0; blk < nb; ++blk) {
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int8_t x = int8_t(q8row[blk * 32 + i]);
        q[blk * 32 + i] = QElem(x);
        sum += x;
      }
      d[blk] = quant_scale(KVType::q8, q8row, D, blk);
      for (int i = 0; i < 8; ++i) b8[blk * 8 + i] = b4[blk * 8 + i] = 0;
      b8[blk * 8] = -q8_offset * sum;
      b4[blk * 8] = -8 * sum;
    }
    if (q4_pairs)
      for (int64_t p = 0; p + 2 <= nb; p += 2) {
        QElem pair[64];
        for (int i = 0; i < 16; ++i) {
          pair[i] = q[p * 32 + i];
          pair[16 + i] = q[(p + 1) * 32 + i];
          pair[32 + i] = q[p * 32 + 16 + i];
          pair[48 + i] = q[(p + 1) * 32 + 16 + i];
        }
        std::memcpy(q + p * 32, pair, sizeof pair);
        b4[p * 8 + 4] = b4[(p + 1) * 8];  // B's constant in lane 4 of the pair's 16
        b4[(p + 1) * 8] = 0;
      }
    r.q = q; r.d = d; r.bias8 = b8; r.bias4 = b4;
    return r;
  }
};

// Dequantizes 16 stored values to float vectors of the kernel's width (through memory: the
// fallback of every width that has no conversion instructions written below).
template <class S>
struct DequantThroughMemory {
  using V = typename S::V;
  static void q8(const uint8_t* p, V* out) {
    alignas(64) float f[16];
    for (int i = 0; i < 16; ++i) f[i] = float(int8_t(p[i]));
    for (int c = 0; c < 16 / S::W; ++c) out[c] = S::load(f + c * S::W);
  }
  // Low nibbles (elements 0-15 of a q4 block) into lo, high nibbles (16-31) into hi.
  static void q4(const uint8_t* p, V* lo, V* hi) {
    alignas(64) float f[32];
    for (int i = 0; i < 16; ++i) { f[i] = float((p[i] & 15) - 8); f[i + 16] = float((p[i] >> 4) - 8); }
    for (int c = 0; c < 16 / S::W; ++c) { lo[c] = S::load(f + c * S::W); hi[c] = S::load(f + 16 + c * S::W); }
  }
  // One half of a q4 block (0: elements 0-15, 1: elements 16-31).
  static void q4_half(const uint8_t* p, int half, V* out) {
    V other[16 / S::W];
    if (half == 0) q4(p, out, other);
    else q4(p, other, out);
  }
};

// Called at the top of each function that calls QuantDot::dot: the relaxed-SIMD build checks there,
// in the code about to run them, that its relaxed dot products are exact (int_dot/simd128_relaxed.hpp
// defines it); elsewhere there is nothing to check.
#if !defined(__wasm_relaxed_simd__)
inline void quant_dot_check_here() {}
#endif

// The scalar definitions (the scalar target, and the meaning of every vector version).
struct QuantDotScalar {
  static constexpr bool kQ4PairOrder = false;
  static constexpr bool kIntegerValues = false;  // P·V dequantizes V (int_dot/simd128.hpp: in integers)
  static constexpr bool kPvTile = false;  // no P·V of a whole tile of its own (int_dot/avx512vnni.hpp has one)
  using FArch = ScalarArch;
  using Row = QueryRow<int8_t>;
  static constexpr int32_t kQ8Offset = 0;
  // acc[r * stride] += q_r · k over the nb blocks of key row k (values, then scales at kscales).
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, float* acc, int stride) {
    for (int64_t blk = 0; blk < nb; ++blk)
      for (int r = 0; r < RB; ++r) {
        const int8_t* qb = q[r]->q + blk * 32;
        int32_t s = Q4 ? q[r]->bias4[blk * 8] : q[r]->bias8[blk * 8];
        if constexpr (Q4) {
          const uint8_t* kb = k + blk * 16;
          for (int i = 0; i < 16; ++i) s += int32_t(qb[i]) * (kb[i] & 15) + int32_t(qb[i + 16]) * (kb[i] >> 4);
        } else {
          const uint8_t* kb = k + blk * 32;
          for (int i = 0; i < 32; ++i) s += int32_t(qb[i]) * int32_t(int8_t(kb[i]));
        }
        acc[r * stride] += q[r]->d[blk] * kscales[blk] * float(s);
      }
  }
};

// Defined by the int_dot file of the translation unit's target: a specialisation for ScalarArch
// (int_dot/scalar.hpp), or the template itself for the target's vector architecture.
template <class Arch>
struct QuantDot;

// The block loop of the 128-bit instruction sets (int_dot/sse2.hpp, simd128.hpp, neon64.hpp): Ops
// prepares a key block once (widened, or split in halves) and adds one query row's products to a
// vector of int32 partial sums (Row, IV, KBlock, bias, zero, prep_q8, prep_q4, apply, to_float).
template <class Arch, class Ops>
struct BlockDot128 : Ops {
  static constexpr bool kQ4PairOrder = false;
  static constexpr bool kPvTile = false;
  static constexpr int32_t kQ8Offset = 0;
  using FArch = Arch;
  using FV = typename Simd<FArch>::V;
  using Row = typename Ops::Row;
  using IV = typename Ops::IV;
  using KBlock = typename Ops::KBlock;
  // acc[r * stride] += q_r · k over the nb blocks of key row k (values, then scales at kscales).
  template <int RB, bool Q4>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    using FS = Simd<FArch>;
    FV acc[RB];  // in registers for the whole row (the caller's array would round-trip memory)
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    for (int64_t blk = 0; blk < nb; ++blk) {
      const KBlock kb = Q4 ? Ops::prep_q4(k + blk * 16) : Ops::prep_q8(k + blk * 32);
      const float kd = kscales[blk];
      for (int r = 0; r < RB; ++r) {
        // q8's constant term is 0 here (kQ8Offset): a zero the compiler folds away, where loading
        // bias8 cost a load and an add per block and row (SIMD128 GQA q8 step: 3-5% faster without,
        // results bitwise the same).
        const IV b = Q4 ? Ops::bias(q[r]->bias4 + blk * 8) : Ops::zero();
        const IV sums = Ops::apply(q[r]->q + blk * 32, kb, b);  // a prepared block is the same for q8 and q4
        acc[r] = FS::fma(Ops::to_float(sums), FS::splat(q[r]->d[blk] * kd), acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = acc[r];
  }
};

// Instruction sets with more than one way to compute a block's sums (the relaxed-SIMD build: its
// relaxed 8-bit dot products, or the exact path, chosen at run time) define kForms,
// with_form<Q4>(f) (calls f with the form to use, an std::integral_constant, read once) and
// dot_form<RB, Q4, Form>. The decode kernel reads the form once per tile of keys, not once per key
// row (the relaxed build's GQA q8 step measured 3-4% slower than the SIMD128 build's on the same
// exact path when every key row read it: Node 20, Chromium 156, Zen 3); elsewhere there is one form.
template <class QD, class = void>
struct HasForms : std::false_type {};
template <class QD>
struct HasForms<QD, std::void_t<decltype(QD::kForms)>> : std::true_type {};
template <class QD, bool Q4, class F>
MASKATTN_ALWAYS_INLINE inline void with_quant_dot_form(F&& f) {
  if constexpr (HasForms<QD>::value) QD::template with_form<Q4>(f);
  else f(std::integral_constant<int, 0>{});
}

// Instruction sets whose dot() and qk_tile() request the key rows ahead themselves (QD defines
// kRequestsKeyRows true) take one more argument, `ahead`: the bytes from each key row they read to
// the row whose lines they request (0: none), a line as their block loop reaches each 64 bytes of
// values (request_key_block). Requested by the kernel instead, all of a group's rows at once, a q8
// row at D = 512 is 9 lines per key and 72 per 8 keys; they filled the core's miss buffers and the
// loads behind them waited (AVX2, Zen 3, from DRAM: the GQA q8 step at D = 512 236 -> 200 ns per key
// and KV head, MHA 147 -> 130; D = 128 unchanged).
template <class QD, class = void>
struct RequestsKeyRows : std::false_type {};
template <class QD>
struct RequestsKeyRows<QD, std::void_t<decltype(QD::kRequestsKeyRows)>> : std::bool_constant<QD::kRequestsKeyRows> {};

// At block blk of a key row k read by a block loop (kBlockBytes of values a block), the lines of the
// row `ahead` bytes on: the one at each 64 bytes of values, and with block 0 the scales' and the
// row's last (a row need not start on a line, so its last line may hold no block's first byte).
template <int kBlockBytes>
MASKATTN_PREFETCH_INLINE void request_key_block(const uint8_t* k, int64_t ahead, int64_t blk, int64_t scales_at,
                                                int64_t nb) {
  if (ahead == 0) return;
  const uint8_t* row = k + ahead;
  if (blk == 0) {
    MASKATTN_PREFETCH(row + scales_at);
    MASKATTN_PREFETCH(row + scales_at + 4 * nb - 1);
  }
  if ((blk * kBlockBytes) % 64 == 0) MASKATTN_PREFETCH(row + blk * kBlockBytes);
}

// Which of QuantDot's functions serve each quantized cache dtype: the decode kernel reaches them
// only through this, with the dtype's RowTraits (kernel/quant.hpp), so a new quantized dtype is its
// RowTraits and its entry here (and the instruction-set functions the entry names).
template <class QD, KVType T>
struct QuantDotOf;

// Whether QD computes Q·Kᵀ for q8 (Q4 false) or q4 keys a tile of its float lanes' keys at a time
// with keys in lanes (QD::qk_tile, where an instruction set defines kQkTile[q8, q4]), for the decode
// kernel's groups of four or more rows.
template <class QD, bool Q4, class = void>
struct HasQkTile : std::false_type {};
template <class QD, bool Q4>
struct HasQkTile<QD, Q4, std::void_t<decltype(QD::kQkTile)>> : std::bool_constant<QD::kQkTile[Q4 ? 1 : 0]> {};

template <class QD>
struct QuantDotOf<QD, KVType::q8> {
  // P·V of a whole tile in integers (QD::kPvTile).
  template <int R>
  static bool pv_tile(const float* const* prow, const uint64_t* use, float* const* orow, const uint8_t* v, int64_t vs,
                      int n, int64_t nb, int64_t ahead, int64_t row_bytes) {
    return QD::template pv_tile<R, false>(prow, use, orow, v, vs, n, nb, ahead, row_bytes);
  }
  static constexpr bool kPairOrder = false;  // QueryRow::prepare's q4_pairs
  template <int RB, int Form, class Row, class FV>  // Form: with_quant_dot_form's
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride,
                  int64_t ahead) {  // ahead: RequestsKeyRows
    if constexpr (HasForms<QD>::value) QD::template dot_form<RB, false, Form>(q, k, kscales, nb, out, stride);
    else if constexpr (RequestsKeyRows<QD>::value) QD::template dot<RB, false>(q, k, kscales, nb, out, stride, ahead);
    else QD::template dot<RB, false>(q, k, kscales, nb, out, stride);
  }
  template <int RB, int NB, class Row>
  static void qk_tile(const Row* const* q, const uint8_t* const* k, int64_t scales_at, int64_t nb, float* s,
                      int64_t s_stride, int n_store, int64_t ahead) {
    if constexpr (RequestsKeyRows<QD>::value) QD::template qk_tile<RB, false, NB>(q, k, scales_at, nb, s, s_stride, n_store, ahead);
    else QD::template qk_tile<RB, false, NB>(q, k, scales_at, nb, s, s_stride, n_store);
  }
  // Columns [16 half, 16 half + 16) of a block's values as floats at x: group g of the ng 16-column
  // groups a pass wants (with g + 1 < ng the next group may come too, at next; not here). Returns
  // how many groups it wrote.
  template <class V>
  static int dequant(const uint8_t* values, int64_t half, int, int, V* x, V*) {
    QD::q8(values + half * 16, x);
    return 1;
  }
  // P·V in integers (QD::kIntegerValues): half a block of keys a and b as pairs (QD::PV::pairs).
  template <class PV, class IV>
  static void pv_pairs(const uint8_t* a, const uint8_t* b, int half, IV* out) {
    PV::pairs_q8(a + 16 * half, b + 16 * half, out);
  }
};

template <class QD>
struct QuantDotOf<QD, KVType::q4> {
  // P·V of a whole tile in integers (QD::kPvTile).
  template <int R>
  static bool pv_tile(const float* const* prow, const uint64_t* use, float* const* orow, const uint8_t* v, int64_t vs,
                      int n, int64_t nb, int64_t ahead, int64_t row_bytes) {
    return QD::template pv_tile<R, true>(prow, use, orow, v, vs, n, nb, ahead, row_bytes);
  }
  static constexpr bool kPairOrder = QD::kQ4PairOrder;
  template <int RB, int Form, class Row, class FV>  // Form: with_quant_dot_form's
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride,
                  int64_t ahead) {  // ahead: RequestsKeyRows
    if constexpr (HasForms<QD>::value) QD::template dot_form<RB, true, Form>(q, k, kscales, nb, out, stride);
    else if constexpr (RequestsKeyRows<QD>::value) QD::template dot<RB, true>(q, k, kscales, nb, out, stride, ahead);
    else QD::template dot<RB, true>(q, k, kscales, nb, out, stride);
  }
  template <int RB, int NB, class Row>
  static void qk_tile(const Row* const* q, const uint8_t* const* k, int64_t scales_at, int64_t nb, float* s,
                      int64_t s_stride, int n_store, int64_t ahead) {
    if constexpr (RequestsKeyRows<QD>::value) QD::template qk_tile<RB, true, NB>(q, k, scales_at, nb, s, s_stride, n_store, ahead);
    else QD::template qk_tile<RB, true, NB>(q, k, scales_at, nb, s, s_stride, n_store);
  }
  // The low nibbles are columns 0-15, the high ones 16-31: a whole block from one load when both.
  template <class V>
  static int dequant(const uint8_t* values, int64_t half, int g, int ng, V* x, V* next) {
    int groups = 1;
    if (half == 0 && g + 1 < ng) {
      QD::q4(values, x, next);
      groups = 2;
    } else {
      QD::q4_half(values, int(half), x);
    }
    return groups;
  }
  template <class PV, class IV>
  static void pv_pairs(const uint8_t* a, const uint8_t* b, int half, IV* out) {
    PV::pairs_q4(a, b, half, out);
  }
};

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail

#if !defined(MASKATTN_INT_DOT)
#error "no integer dot product named: the target's translation unit (src/dispatch/kernel.cpp.in) defines MASKATTN_INT_DOT"
#endif
#include MASKATTN_INT_DOT
