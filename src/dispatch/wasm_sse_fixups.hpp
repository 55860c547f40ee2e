// Emscripten 3.1.6 implements _mm_cvttps_epi32 / _mm_cvtps_epi32 as a 4-lane scalar loop, and
// xsimd's tanh/exp and float->int casts go through them. Map both onto SIMD128's saturating
// truncation (after round-to-nearest-even for the rounding one) before xsimd is included, so the
// whole kernel stays in f32x4/i32x4 instructions. In-range results are identical.
#pragma once

#if defined(__wasm_simd128__)
#include <smmintrin.h>
#include <wasm_simd128.h>

#undef _mm_cvttps_epi32
#undef _mm_cvtps_epi32
#define _mm_cvttps_epi32(a) ((__m128i)wasm_i32x4_trunc_sat_f32x4((v128_t)(a)))
#define _mm_cvtps_epi32(a) ((__m128i)wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest((v128_t)(a))))
#endif
