// The micro-kernel probe, written once against Simd<Arch> and included by one file per xsimd
// architecture that bench/CMakeLists.txt makes from probe.cpp.in (defining MASKATTN_KERNEL_NS and
// MASKATTN_SIMD first), exactly as the library's kernels are built (src/dispatch/kernel.cpp.in).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "figures.hpp"
#include "kernel/prefill_kernel.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// `Chains` independent chains a = a * x + y, with Simd<Arch>::fma: the fused instruction where the
// architecture has one, else a multiply and an add (2 flops either way). No loads: the ceiling.
template <class Arch, int Chains>
MASKATTN_NOINLINE_WASM float multiply_add_chains(int64_t iters, float seed) {
  using S = Simd<Arch>;
  using V = typename S::V;
  V a[Chains];
  for (int i = 0; i < Chains; ++i) a[i] = S::splat(seed + 1e-3f * float(i));
  const V x = S::splat(0.999999f), y = S::splat(seed * 1e-7f);
  for (int64_t n = 0; n < iters; ++n)
    for (int i = 0; i < Chains; ++i) a[i] = S::fma(a[i], x, y);
  V s = a[0];
  for (int i = 1; i < Chains; ++i) s = s + a[i];
  return S::hsum(s);
}

// Median GFLOP/s of 5 runs of body(reps), reps grown until one run takes `seconds` / 5.
template <class F>
double median_gflops(double flops_per_rep, double seconds, F&& body) {
  using clock = std::chrono::steady_clock;
  auto time = [&](int64_t reps) {
    const auto t0 = clock::now();
    body(reps);
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  int64_t reps = 16;
  while (time(reps) < seconds / 5 && reps < (int64_t(1) << 40)) reps *= 2;
  std::vector<double> rates;
  for (int run = 0; run < 5; ++run) rates.push_back(flops_per_rep * double(reps) / time(reps) * 1e-9);
  std::sort(rates.begin(), rates.end());
  return rates[2];
}

template <class Arch>
MicrokernelFigures measure_microkernel(int d, double seconds) {
  using Prefill = PrefillAttention<Arch>;
  constexpr int QR = Prefill::QR, KT = Prefill::KT;
  Problem p;  // one (batch, head) of QR query rows over one tile of KT keys, D = Dv = d
  p.B = p.Hq = p.Hkv = 1;
  p.Lq = QR;
  p.Lk = KT;
  p.D = p.Dv = d;
  Prefill kernel(p);
  Workspace ws;
  kernel.reserve(ws);
  ws.ktiles.resize(size_t(KT) * d);  // the probe's K and V rows (float tensors are read in place)
  ws.vtiles.resize(size_t(KT) * d);

  // Random Q, K, V in [-1, 1], in the kernel's layouts (prefill_kernel.hpp): Q transposed [D][QR],
  // K and V rows [KT][d]; scores [KT][QR], outputs transposed [d][QR].
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(size_t(QR) * d), k(size_t(KT) * d), v(size_t(KT) * d);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = uniform(rng);
  for (int r = 0; r < QR; ++r)
    for (int c = 0; c < d; ++c) ws.qblock[size_t(c) * QR + r] = q[size_t(r) * d + c];
  std::copy(k.begin(), k.end(), ws.ktiles.begin());
  std::copy(v.begin(), v.end(), ws.vtiles.begin());

  // Q·Kᵀ then P·V of its stored scores, checked against float64 first: figures of a wrong loop are
  // worth nothing.
  std::fill(ws.oacc.begin(), ws.oacc.end(), 0.0f);
  kernel.microtiles_only(ws, 1, true, false);
  kernel.microtiles_only(ws, 1, false, true);
  MicrokernelFigures f;
  for (int r = 0; r < QR; ++r) {
    std::vector<double> s(KT);
    for (int j = 0; j < KT; ++j) {
      double scale = 0;
      for (int c = 0; c < d; ++c) {
        s[size_t(j)] += double(q[size_t(r) * d + c]) * k[size_t(j) * d + c];
        scale += std::abs(double(q[size_t(r) * d + c]) * k[size_t(j) * d + c]);
      }
      f.max_rel_error = std::max(f.max_rel_error, std::abs(ws.scores[size_t(j) * QR + r] - s[size_t(j)]) / std::max(scale, 1e-30));
    }
    for (int c = 0; c < d; ++c) {
      double o = 0, scale = 0;
      for (int j = 0; j < KT; ++j) {
        o += s[size_t(j)] * v[size_t(j) * d + c];
        scale += std::abs(s[size_t(j)] * v[size_t(j) * d + c]);
      }
      f.max_rel_error = std::max(f.max_rel_error, std::abs(ws.oacc[size_t(c) * QR + r] - o) / std::max(scale, 1e-30));
    }
  }

  // Relative to the sum of |terms|: a float sum of n products is within n * 2^-24 of it (first
  // order); an output sums KT products of scores that carry D roundings each.
  f.error_bound = double(d + KT) * std::ldexp(1.0, -24);
  f.lanes = Simd<Arch>::W;
  if (seconds <= 0) return f;  // the check alone
  f.mr = Prefill::NK;
  f.nv = Prefill::RV;
  f.kt = KT;
  volatile float sink = 0;
  const double chain_flops = 2.0 * Simd<Arch>::W;
  f.peak_gflops = std::max(median_gflops(8 * chain_flops, seconds, [&](int64_t n) { sink = multiply_add_chains<Arch, 8>(n, sink); }),
                           median_gflops(12 * chain_flops, seconds, [&](int64_t n) { sink = multiply_add_chains<Arch, 12>(n, sink); }));
  const double qk_flops = 2.0 * QR * KT * d, pv_flops = 2.0 * QR * KT * d;
  f.qk_gflops = median_gflops(qk_flops, seconds, [&](int64_t n) { kernel.microtiles_only(ws, n, true, false); });
  std::fill(ws.oacc.begin(), ws.oacc.end(), 0.0f);
  f.pv_gflops = median_gflops(pv_flops, seconds, [&](int64_t n) { kernel.microtiles_only(ws, n, false, true); });
  std::fill(ws.oacc.begin(), ws.oacc.end(), 0.0f);
  f.both_gflops = median_gflops(qk_flops + pv_flops, seconds, [&](int64_t n) { kernel.microtiles_only(ws, n, true, true); });
  sink = sink + ws.oacc[0];
  return f;
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
