// Run-time dispatch. Native x86 builds carry sse2, avx2+fma and avx512f kernels and pick the widest
// the CPU (and OS) supports, using xsimd's cpuid; WebAssembly is a compile-time target (SIMD128 or
// scalar build), as there is no run-time feature detection inside a module; aarch64 builds carry
// the neon64 kernel, which every aarch64 CPU runs (NEON is baseline there).
#include <algorithm>
#include <string>

#include "base/errors.hpp"
#include "dispatch/targets.hpp"
#include "maskattn/reference.hpp"

#if defined(MASKATTN_WITH_SSE2) || defined(MASKATTN_WITH_AVX2) || defined(MASKATTN_WITH_AVX512) || \
    defined(MASKATTN_WITH_AVX512VNNI)
#include <xsimd/config/xsimd_cpuid.hpp>
#define MASKATTN_X86_DISPATCH 1
#endif

#ifndef MASKATTN_VERSION
#define MASKATTN_VERSION "0.0.0"
#endif

namespace maskattn {
namespace {

bool compiled_in(Target t) {
  switch (t) {
    case Target::automatic:
    case Target::reference:
    case Target::scalar:
      return true;
#if defined(MASKATTN_WITH_SSE2)
    case Target::sse2: return true;
#endif
#if defined(MASKATTN_WITH_AVX2)
    case Target::avx2: return true;
#endif
#if defined(MASKATTN_WITH_AVX512)
    case Target::avx512: return true;
#endif
#if defined(MASKATTN_WITH_AVX512VNNI)
    case Target::avx512vnni: return true;
#endif
#if defined(MASKATTN_WITH_SIMD128)
    case Target::simd128: return true;
#endif
#if defined(MASKATTN_WITH_NEON64)
    case Target::neon64: return true;
#endif
    default: return false;
  }
}

bool cpu_supports(Target t) {
#if defined(MASKATTN_X86_DISPATCH)
  static const auto cpu = xsimd::available_architectures();
  switch (t) {
    case Target::sse2: return cpu.sse2;
    // F16C converts float16 KV caches (every AVX2 CPU has it; checked all the same).
    case Target::avx2: return cpu.avx2 && cpu.fma3_avx2 && __builtin_cpu_supports("f16c");
    case Target::avx512: return cpu.avx512f && cpu.avx512dq;
    case Target::avx512vnni:
      return cpu.avx512f && cpu.avx512dq && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
    default: return true;
  }
#else
  (void)t;
  return true;
#endif
}

}  // namespace

bool target_available(Target t) noexcept { return compiled_in(t) && cpu_supports(t); }

Target best_target() noexcept {
  for (Target t : {Target::avx512vnni, Target::avx512, Target::avx2, Target::sse2, Target::simd128, Target::neon64})
    if (target_available(t)) return t;
  return Target::scalar;
}

const char* target_name(Target t) noexcept {
  switch (t) {
    case Target::automatic: return "automatic";
    case Target::reference: return "reference";
    case Target::scalar: return "scalar";
    case Target::sse2: return "sse2";
    case Target::avx2: return "avx2";
    case Target::avx512: return "avx512";
    case Target::avx512vnni: return "avx512vnni";
    case Target::simd128: return "simd128";
    case Target::neon64: return "neon64";
  }
  return "unknown";
}

const char* kernel_name(Kernel k) noexcept {
  switch (k) {
    case Kernel::automatic: return "automatic";
    case Kernel::prefill: return "prefill";
    case Kernel::decode: return "decode";
    case Kernel::decode_split: return "decode_split";
  }
  return "unknown";
}

int decode_max_rows(Target target, bool float_kv) noexcept {
  if (target == Target::automatic) target = best_target();
  if (!float_kv || target == Target::scalar || target == Target::reference) return detail::kDecodeMaxRows;
  return target == Target::simd128 ? detail::kDecodeMaxRowsFloatWasm : detail::kDecodeMaxRowsFloat;
}

int target_lanes(Target t) noexcept {
  switch (t) {
    case Target::sse2: case Target::simd128: case Target::neon64: return 4;
    case Target::avx2: return 8;
    case Target::avx512: case Target::avx512vnni: return 16;
    case Target::automatic: return target_lanes(best_target());
    default: return 1;
  }
}

const char* version() noexcept { return MASKATTN_VERSION; }

namespace detail {

void run_kernel(Target t, const Problem& p) {
  switch (t) {
#if defined(MASKATTN_WITH_SSE2)
    case Target::sse2: return attention_sse2(p);
#endif
#if defined(MASKATTN_WITH_AVX2)
    case Target::avx2: return attention_avx2(p);
#endif
#if defined(MASKATTN_WITH_AVX512)
    case Target::avx512: return attention_avx512(p);
#endif
#if defined(MASKATTN_WITH_AVX512VNNI)
    case Target::avx512vnni: return attention_avx512vnni(p);
#endif
#if defined(MASKATTN_WITH_SIMD128)
    case Target::simd128: return attention_simd128(p);
#endif
#if defined(MASKATTN_WITH_NEON64)
    case Target::neon64: return attention_neon64(p);
#endif
    default: return attention_scalar(p);
  }
}

Target resolve_target(Target requested) {
  if (!target_available(requested))
    fail("target", cat(target_name(requested), " is not available here (compiled in: ", compiled_targets_string(),
                       "; best: ", target_name(best_target()), ")"));
  return requested == Target::automatic ? best_target() : requested;
}

ReferenceResult reference_compute(const Problem& p, Precision precision);  // reference/reference.cpp

// The reference computes into its own buffers first, so output is written only on success.
void run_reference(const Problem& p) {
  const ReferenceResult r = reference_compute(p, Precision::fp64);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.Lq; ++i) {
        const int64_t row = (b * p.Hq + h) * p.Lq + i;
        if (p.Dv == 0) continue;  // no output row (out may be null)
        float* o = p.out + b * p.os.b + h * p.os.h + i * p.os.l;
        for (int64_t c = 0; c < p.Dv; ++c) o[c] = float(r.out[size_t(row * p.Dv + c)]);
      }
  if (p.weights) std::transform(r.weights.begin(), r.weights.end(), p.weights, [](double x) { return float(x); });
  if (p.lse) std::transform(r.lse.begin(), r.lse.end(), p.lse, [](double x) { return float(x); });
}

std::string compiled_targets_string() {
  std::string s;
  for (Target t : kKernelTargets)
    if (compiled_in(t)) s += (s.empty() ? "" : ", ") + std::string(target_name(t));
  return s;
}

}  // namespace detail
}  // namespace maskattn
