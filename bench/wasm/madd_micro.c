// Fused (f32x4.relaxed_madd) vs separate multiply and add in WebAssembly, in the two patterns that
// matter: an accumulation whose products are off the dependency chain (the kernel's Q·Kᵀ and P·V:
// acc += q * k) and a chain through the multiply (a polynomial's Horner steps: acc = acc * b + a).
// Eight independent f32x4 accumulators each. Built and run by bench/js/madd-micro.mjs.
#include <wasm_simd128.h>

#define ACCS 8

float kbuf[ACCS * 4 + 64];
float* kptr(void) { return kbuf; }

__attribute__((noinline)) float chain_fused(int iters, float x) {
  v128_t acc[ACCS], a = wasm_f32x4_splat(x), b = wasm_f32x4_splat(0.999f);
  for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_splat((float)i);
  for (int it = 0; it < iters; ++it)
    for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_relaxed_madd(acc[i], b, a);
  v128_t s = acc[0];
  for (int i = 1; i < ACCS; ++i) s = wasm_f32x4_add(s, acc[i]);
  return wasm_f32x4_extract_lane(s, 0);
}

__attribute__((noinline)) float chain_separate(int iters, float x) {
  v128_t acc[ACCS], a = wasm_f32x4_splat(x), b = wasm_f32x4_splat(0.999f);
  for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_splat((float)i);
  for (int it = 0; it < iters; ++it)
    for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_add(wasm_f32x4_mul(acc[i], b), a);
  v128_t s = acc[0];
  for (int i = 1; i < ACCS; ++i) s = wasm_f32x4_add(s, acc[i]);
  return wasm_f32x4_extract_lane(s, 0);
}

__attribute__((noinline)) float accumulate_fused(int iters, const float* k) {
  v128_t acc[ACCS];
  for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_splat(0);
  for (int it = 0; it < iters; ++it) {
    const v128_t q = wasm_v128_load32_splat(k + ACCS * 4 + (it & 63));
    for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_relaxed_madd(q, wasm_v128_load(k + 4 * i), acc[i]);
  }
  v128_t s = acc[0];
  for (int i = 1; i < ACCS; ++i) s = wasm_f32x4_add(s, acc[i]);
  return wasm_f32x4_extract_lane(s, 0);
}

__attribute__((noinline)) float accumulate_separate(int iters, const float* k) {
  v128_t acc[ACCS];
  for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_splat(0);
  for (int it = 0; it < iters; ++it) {
    const v128_t q = wasm_v128_load32_splat(k + ACCS * 4 + (it & 63));
    for (int i = 0; i < ACCS; ++i) acc[i] = wasm_f32x4_add(acc[i], wasm_f32x4_mul(q, wasm_v128_load(k + 4 * i)));
  }
  v128_t s = acc[0];
  for (int i = 1; i < ACCS; ++i) s = wasm_f32x4_add(s, acc[i]);
  return wasm_f32x4_extract_lane(s, 0);
}
