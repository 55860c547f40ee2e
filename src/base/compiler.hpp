// What the compilers and the WebAssembly toolchain do to the kernels' code, said once. The kernel
// headers name these instead of testing compilers and platforms themselves; what differs by SIMD
// target lives in kernel/simd/<target>.hpp and the target table.
#pragma once

// Inlined whatever the compiler's cost model says (GCC and clang; elsewhere a plain hint).
#if defined(__GNUC__)
#define MASKATTN_ALWAYS_INLINE __attribute__((always_inline))
#else
#define MASKATTN_ALWAYS_INLINE
#endif

// Kept a function of its own in WebAssembly only: V8 allocates registers per function, and a
// register block inlined into its large caller measured slower there; natively the compilers'
// own choice measured best.
#if defined(__GNUC__) && defined(__wasm__)
#define MASKATTN_NOINLINE_WASM __attribute__((noinline))
#else
#define MASKATTN_NOINLINE_WASM
#endif

// Kept a function of its own on x86-64 (GCC and clang), where inlining it measured slower.
#if defined(__GNUC__) && defined(__x86_64__)
#define MASKATTN_NOINLINE_X86 __attribute__((noinline))
#else
#define MASKATTN_NOINLINE_X86
#endif

// A loop GCC should unroll 16 times (clang unrolls such loops on its own).
#if defined(__GNUC__) && !defined(__clang__)
#define MASKATTN_UNROLL_16 _Pragma("GCC unroll 16")
#else
#define MASKATTN_UNROLL_16
#endif

// The cache line at p requested (nothing where the compiler has no prefetch builtin).
#if defined(__GNUC__)
#define MASKATTN_PREFETCH(p) __builtin_prefetch(p)
#else
#define MASKATTN_PREFETCH(p) ((void)(p))
#endif

// A function compiled for AVX2 (without FMA, so every rounding is the same) beside its baseline
// copy, which calls it where the CPU has AVX2 (x86-64, GCC and clang): for the few loops outside the
// dispatched kernels whose cost shows, such as RoPE's rotation of each appended key row. A check at
// the call, not an ifunc (target_clones): ifunc resolvers run before the sanitizers' runtimes start
// (ThreadSanitizer's test binary crashed at load), and clang wants them on every declaration.
#if defined(__GNUC__) && defined(__x86_64__)
#define MASKATTN_X86_AVX2_COPY 1
#define MASKATTN_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define MASKATTN_X86_AVX2_COPY 0
#define MASKATTN_TARGET_AVX2
#endif

namespace maskattn::detail {

// Whether prefetches issue instructions: WebAssembly has none (clang drops __builtin_prefetch
// there), and the decode kernel then orders its reads for the hardware's prefetcher.
#if defined(__GNUC__) && !defined(__wasm__)
inline constexpr bool kSoftwarePrefetch = true;
#else
inline constexpr bool kSoftwarePrefetch = false;
#endif

// Whether a call the kernel wants kept as a call must go through a pointer the optimiser cannot see
// through: Emscripten's binaryen (emcc -O3) inlines every function that has a single caller,
// whatever its size and its noinline attribute, and V8 then allocates registers across one huge
// function (the prefill group steps measured 1.5x slower, the decode step's 16-bit register blocks
// 1.6x, in Node).
#if defined(__wasm__)
inline constexpr bool kCallsThroughOpaquePointers = true;
#else
inline constexpr bool kCallsThroughOpaquePointers = false;
#endif

}  // namespace maskattn::detail
