// Q·Kᵀ over q8/q4 keys with the relaxed-SIMD 8-bit dot products (relaxed-SIMD builds only), chosen
// at run time by a probe: the SIMD128 QuantDot (int_dot/simd128.hpp) calls RelaxedIntDot::dot when
// RelaxedIntDot::mode() is not exact, else runs its exact i32x4.dot_i16x8_s path.
//
// The relaxed instructions multiply signed bytes by "i7" bytes and are exact only when the second
// operand is in [0, 127], where the specification leaves nothing to the engine. The keys take that
// side: q4 nibbles are in [0, 15] already; for q8 (k in [-127, 127]) the key gives |k| and its
// sign moves onto the query ((q ^ m) - m with m = k >> 7, exact since q is in [-127, 127]). So a
// block's sum is the same integer as the exact path's, when the engine implements the instruction
// as specified. Engines differ even in range: Node 20's V8 (measured on a CPU with AVX-VNNI) computes
// i32x4.relaxed_dot_i8x16_i7x16_add_s wrongly in its baseline compiler (Liftoff) in some register
// shapes (the kernel's among them; twice the sum in another) and rightly once it optimizes. A probe
// can show an instruction wrong, never prove every use right, so: at module start both forms run on
// known inputs in two shapes (add_form_stored(), where Node 20 was seen wrong, and check(), the
// kernel's), and every call of the kernel checks its mode again in its own compiled code
// (check_here(): the tier may have changed); a mode found wrong anywhere is not used again.
//   i8x16-add  i32x4.relaxed_dot_i8x16_i7x16_add_s: 2 per block and row (the partial sums are its
//              accumulator)
//   i16x8      i16x8.relaxed_dot_i8x16_i7x16_s + i32x4.extadd_pairwise_i16x8_s, for q4 keys: the
//              two products are added as int16 first (|pair sums| <= 2 * 15 * 127). q8 keys take
//              the exact path in this mode: their products need widening each (2 * 127 * 127
//              leaves no room for a second), and with the sign transfer that ran 7-11% slower
//              than i32x4.dot_i16x8_s (Node 20, GQA and MHA decode steps)
#pragma once

#include "base/arch_namespace.hpp"

#if defined(__wasm_relaxed_simd__)

#include <wasm_simd128.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// A query row of the exact path (Base: int16 values) with its values as int8 as well, so that
// either path can run on the same prepared rows.
template <class Base>
struct WithInt8Values : Base {
  const int8_t* q8 = nullptr;
  static int64_t bytes(int64_t nb) { return Base::bytes(nb) + nb * 32; }
  static WithInt8Values prepare(const uint8_t* q8row, int64_t D, int64_t nb, int32_t q8_offset, uint8_t* at,
                                bool q4_pairs = false) {
    WithInt8Values r;
    static_cast<Base&>(r) = Base::prepare(q8row, D, nb, q8_offset, at, q4_pairs);
    auto* v = reinterpret_cast<int8_t*>(at + Base::bytes(nb));
    std::memcpy(v, q8row, size_t(nb) * 32);  // a q8 row's values come first (kernel/quant.hpp)
    r.q8 = v;
    return r;
  }
};

struct RelaxedIntDot {
  // Ordered: a mode found wrong only ever gives way to a lower one.
  enum Mode : int { exact = 0, i16x8 = 1, i8x16_add = 2 };

  // Known inputs (extremes of both operands' ranges: signed bytes in [-127, 127], i7 bytes in
  // [0, 127]), two vectors of each as in a key block, and the specified results of both forms,
  // filled at module start. Mutable globals, read after a compiler barrier: nothing can be folded.
  struct Probe {
    alignas(16) int8_t a[32] = {127, -127, 5, -3, 100, 127, -127, 1, -64, 99, 0, -1, 127, 127, -127, -127,
                                -127, 127, -1, 2, -100, 50, 127, -127, 64, -99, 1, 0, -127, -127, 127, 127};
    alignas(16) int8_t b[32] = {127, 127, 3, 7, 0, 64, 1, 127, 33, 2, 127, 126, 127, 127, 127, 127,
                                127, 0, 127, 1, 127, 2, 127, 127, 15, 15, 0, 8, 127, 127, 127, 127};
    alignas(16) int8_t sign[32] = {};  // the kernel's sign masks, zero here
    alignas(16) int32_t c[4] = {1000, -7, 0, 123456};
    alignas(16) int32_t want_add[4] = {}, want_i16x8[4] = {};
    Probe() {
      for (int i = 0; i < 4; ++i) {
        int32_t s = 0;
        for (int h = 0; h < 2; ++h)
          for (int j = 0; j < 4; ++j) s += int32_t(a[16 * h + 4 * i + j]) * b[16 * h + 4 * i + j];
        want_i16x8[i] = s;
        want_add[i] = s + c[i];
      }
    }
  };
  struct Checked { bool add, i16x8; };
  // Both forms on the probe's inputs, in the compiled code of the function this is inlined into,
  // and in the kernel's shape: per half a signed operand computed just before its one use (the
  // sign move), two accumulations chained.
  __attribute__((always_inline)) static Checked check(const Probe& p) {
    __asm__ volatile("" ::: "memory");
    auto signed_half = [&p](int h) {
      const v128_t m = wasm_v128_load(p.sign + 16 * h);
      return wasm_i8x16_sub(wasm_v128_xor(wasm_v128_load(p.a + 16 * h), m), m);
    };
    v128_t add = wasm_v128_load(p.c), pairs = wasm_i32x4_splat(0);
    for (int h = 0; h < 2; ++h)
      add = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(signed_half(h), wasm_v128_load(p.b + 16 * h), add);
    for (int h = 0; h < 2; ++h)
      pairs = wasm_i32x4_add(pairs, wasm_i32x4_extadd_pairwise_i16x8(
                                        wasm_i16x8_relaxed_dot_i8x16_i7x16(signed_half(h), wasm_v128_load(p.b + 16 * h))));
    return {wasm_i32x4_all_true(wasm_i32x4_eq(add, wasm_v128_load(p.want_add))),
            wasm_i32x4_all_true(wasm_i32x4_eq(pairs, wasm_v128_load(p.want_i16x8)))};
  }
  // The add form once more, its result stored and compared lane by lane: the shape in which
  // Node 20's Liftoff was seen wrong (twice the sum), and which catches it where check() does not,
  // though the kernel is wrong in that tier too. At module start and in set().
  static bool add_form_stored(const Probe& p) {
    alignas(16) int8_t a[16], b[16];
    alignas(16) int32_t c[4], got[4];
    const volatile Probe& v = p;
    for (int i = 0; i < 16; ++i) { a[i] = v.a[i]; b[i] = v.b[i]; }
    for (int i = 0; i < 4; ++i) c[i] = v.c[i];
    wasm_v128_store(got, wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(a), wasm_v128_load(b), wasm_v128_load(c)));
    for (int i = 0; i < 4; ++i) {
      int32_t want = c[i];
      for (int j = 0; j < 4; ++j) want += int32_t(a[4 * i + j]) * b[4 * i + j];
      if (got[i] != want) return false;
    }
    return true;
  }
  // How the engine lowers the add form, read from inputs outside its specified range (i7 bytes of
  // 255 times 127): x86 without AVX-VNNI adds each pair of products in int16 with saturation
  // (pmaddubsw, then pmaddwd and an add: 2 x 32767 per lane), x86 with AVX-VNNI sums all four
  // (vpdpbusd: 4 x 127 x 255), ARM's sdot takes the byte as signed (4 x 127 x -1).
  enum Lowering : int { unknown = 0, x86_pairs_saturated = 1, x86_vnni = 2, signed_bytes = 3 };
  static Lowering lowering(const Probe& p) {
    alignas(16) int8_t a[16], b[16];
    alignas(16) int32_t got[4];
    const volatile Probe& v = p;
    for (int i = 0; i < 16; ++i) { a[i] = int8_t(127 + v.sign[i]); b[i] = int8_t(-1 - v.sign[i]); }
    wasm_v128_store(got, wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(a), wasm_v128_load(b), wasm_i32x4_splat(0)));
    const int32_t x = got[0];
    for (int i = 1; i < 4; ++i)
      if (got[i] != x) return unknown;
    return x == 2 * 32767 ? x86_pairs_saturated : x == 4 * 127 * 255 ? x86_vnni : x == 4 * 127 * -1 ? signed_bytes : unknown;
  }
  static const char* name(Lowering l) {
    return l == x86_pairs_saturated ? "x86-pairs-saturated" : l == x86_vnni ? "x86-vnni" : l == signed_bytes ? "signed-bytes" : "unknown";
  }
  // The form to start with: the add form where it checks exact, except where the engine lowers it
  // to pmaddubsw + pmaddwd + add (no AVX-VNNI): there q4 keys' i16x8 form and q8 keys' exact path
  // both ran faster (Chromium 156, Zen 3, decode step: GQA q8 1.33x and q4 1.06x, MHA q8 1.06x,
  // MHA q4 the same), and i16x8 mode gives each of them that.
  static Mode best(Checked c, Lowering l) {
    if (c.add && !(l == x86_pairs_saturated && c.i16x8)) return i8x16_add;
    return c.i16x8 ? i16x8 : exact;
  }

  static Mode mode();      // read by QuantDot::with_form once per tile of keys
  static bool set(Mode m);  // tests, benchmarks: a relaxed mode only where its instruction checks exact
  // At the top of each function that calls QuantDot::dot (inlined there): engines compile a
  // function at several tiers and the relaxed instructions may differ between them (Node 20: the
  // add form is wrong in the baseline compiler, Liftoff, and right once optimized), so the mode in
  // use is checked in the code that is about to use it, every call (a few instructions per tile of
  // keys); a mode found wrong is replaced for good by the best one that checks exact here.
  __attribute__((always_inline)) static void check_here();
  static const char* name(Mode m) { return m == i8x16_add ? "relaxed-i8" : m == i16x8 ? "relaxed-i8-i16x8" : "i16"; }

  // acc[r * stride] += q_r · k over the nb blocks of key row k, as QuantDot::dot (Row: WithInt8Values).
  template <class FS, Mode M, int RB, bool Q4, class Row, class FV>
  static void dot(const Row* const* q, const uint8_t* k, const float* kscales, int64_t nb, FV* out, int stride) {
    static_assert(M == i8x16_add || (M == i16x8 && Q4), "the i16x8 form serves q4 keys (q8: the exact path)");
    FV acc[RB];  // in registers for the whole row
    for (int r = 0; r < RB; ++r) acc[r] = out[r * stride];
    for (int64_t blk = 0; blk < nb; ++blk) {
      v128_t kv[2], sign[2];  // the i7 operands (nibbles, or |k|) and, for q8, k's sign masks
      if constexpr (Q4) {
        const v128_t x = wasm_v128_load(k + blk * 16);
        kv[0] = wasm_v128_and(x, wasm_i8x16_splat(15));
        kv[1] = wasm_u8x16_shr(x, 4);
      } else {
        for (int h = 0; h < 2; ++h) {
          const v128_t x = wasm_v128_load(k + blk * 32 + 16 * h);
          kv[h] = wasm_i8x16_abs(x);
          sign[h] = wasm_i8x16_shr(x, 7);
        }
      }
      const float kd = kscales[blk];
      for (int r = 0; r < RB; ++r) {
        v128_t qv[2];
        for (int h = 0; h < 2; ++h) {
          qv[h] = wasm_v128_load(q[r]->q8 + blk * 32 + 16 * h);
          if constexpr (!Q4) qv[h] = wasm_i8x16_sub(wasm_v128_xor(qv[h], sign[h]), sign[h]);
        }
        v128_t sums = wasm_v128_load((Q4 ? q[r]->bias4 : q[r]->bias8) + blk * 8);
        if constexpr (M == i8x16_add) {
          sums = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(qv[0], kv[0], sums);
          sums = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(qv[1], kv[1], sums);
        } else {
          const v128_t p = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(qv[0], kv[0]),
                                          wasm_i16x8_relaxed_dot_i8x16_i7x16(qv[1], kv[1]));
          sums = wasm_i32x4_add(sums, wasm_i32x4_extadd_pairwise_i16x8(p));
        }
        acc[r] = FS::fma(FV(__m128(wasm_f32x4_convert_i32x4(sums))), FS::splat(q[r]->d[blk] * kd), acc[r]);
      }
    }
    for (int r = 0; r < RB; ++r) out[r * stride] = acc[r];
  }
};

inline RelaxedIntDot::Probe relaxed_int_dot_probe;
inline const RelaxedIntDot::Lowering relaxed_int_dot_lowering = RelaxedIntDot::lowering(relaxed_int_dot_probe);
// The mode in use: at module start, the best the probe's check finds exact (in whatever tier runs
// module initialisation) for this lowering, lowered by check_here(); atomic, as threads may lower
// it together.
inline std::atomic<int> relaxed_int_dot_mode{[] {
  RelaxedIntDot::Checked c = RelaxedIntDot::check(relaxed_int_dot_probe);
  c.add = c.add && RelaxedIntDot::add_form_stored(relaxed_int_dot_probe);
  return int(RelaxedIntDot::best(c, relaxed_int_dot_lowering));
}()};

inline RelaxedIntDot::Mode RelaxedIntDot::mode() { return Mode(relaxed_int_dot_mode.load(std::memory_order_relaxed)); }
inline bool RelaxedIntDot::set(Mode m) {
  Checked c = check(relaxed_int_dot_probe);
  c.add = c.add && add_form_stored(relaxed_int_dot_probe);
  if ((m == i8x16_add && !c.add) || (m == i16x8 && !c.i16x8)) return false;
  relaxed_int_dot_mode.store(m, std::memory_order_relaxed);
  return true;
}
inline void RelaxedIntDot::check_here() {
  int m = relaxed_int_dot_mode.load(std::memory_order_relaxed);
  if (m == exact) return;
  const Checked c = check(relaxed_int_dot_probe);
  if ((m == i8x16_add && c.add) || (m == i16x8 && c.i16x8)) return;
  const int lower = c.i16x8 ? i16x8 : exact;
  while (m > lower && !relaxed_int_dot_mode.compare_exchange_weak(m, lower, std::memory_order_relaxed)) {
  }
}

// The choice the module reports (bindings/: JS `backend.quantDot`) and tests may change; C
// linkage because the bindings are compiled without relaxed SIMD and do not include the kernel.
extern "C" __attribute__((used)) inline const char* maskattn_relaxed_quant_dot() {
  return RelaxedIntDot::name(RelaxedIntDot::mode());
}
// How the engine lowers the add form (RelaxedIntDot::Lowering), for tests and benchmarks.
extern "C" __attribute__((used)) inline const char* maskattn_relaxed_dot_lowering() {
  return RelaxedIntDot::name(relaxed_int_dot_lowering);
}
// mode: 0 exact, 1 relaxed i16x8 form, 2 relaxed i8x16 add form; false where that one is not exact.
extern "C" __attribute__((used)) inline bool maskattn_set_relaxed_quant_dot(int mode) {
  return mode >= 0 && mode <= 2 && RelaxedIntDot::set(RelaxedIntDot::Mode(mode));
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail

#endif  // __wasm_relaxed_simd__
