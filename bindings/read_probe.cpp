// The memory's read bandwidth as this engine reaches it, for the benchmarks' roofline (a decode
// step is bound by reading K and V): a buffer well beyond the last-level cache summed with 128-bit
// loads (SIMD128 builds; 32-bit ones in the scalar build, which has no wider load), split among
// tasks of maskattn's own pool as the kernels' work is, best of several passes, in GB/s.
// Compiled with -msimd128 in the SIMD builds (bindings/CMakeLists.txt), whatever the kernels use.
#include <emscripten.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <maskattn/maskattn.hpp>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace {

float sum_floats(const float* p, size_t n) {
#if defined(__wasm_simd128__)
  // Four independent accumulators: the adds' latency never limits the loads.
  v128_t a = wasm_f32x4_splat(0), b = a, c = a, d = a;
  for (size_t i = 0; i + 16 <= n; i += 16) {
    a = wasm_f32x4_add(a, wasm_v128_load(p + i));
    b = wasm_f32x4_add(b, wasm_v128_load(p + i + 4));
    c = wasm_f32x4_add(c, wasm_v128_load(p + i + 8));
    d = wasm_f32x4_add(d, wasm_v128_load(p + i + 12));
  }
  const v128_t s = wasm_f32x4_add(wasm_f32x4_add(a, b), wasm_f32x4_add(c, d));
  return wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1) + wasm_f32x4_extract_lane(s, 2) +
         wasm_f32x4_extract_lane(s, 3);
#else
  float s[4] = {0, 0, 0, 0};
  for (size_t i = 0; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += p[i + k];
  return (s[0] + s[1]) + (s[2] + s[3]);
#endif
}

}  // namespace

// GB/s reading `megabytes` MiB on `threads` tasks, best of `reps` passes.
extern "C" double maskattn_read_probe(double megabytes, double threads, double reps) {
  const size_t n = size_t(std::max(1.0, std::min(megabytes, 1024.0)) * 1048576.0 / 64.0) * 16;  // whole 64-byte lines
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(maskattn::kMaxThreads, int64_t(threads)));
  std::vector<float> buffer(n, 1.0f);
  std::vector<float> sums(static_cast<size_t>(tasks));
  const size_t per_task = n / size_t(tasks) / 16 * 16;
  double best = 0;
  for (int r = 0; r < std::max(1, int(reps)); ++r) {
    const double t0 = emscripten_get_now();
    maskattn::builtin_executor().parallel_for(tasks, [&](int64_t t) {
      sums[size_t(t)] = sum_floats(buffer.data() + size_t(t) * per_task, per_task);
    });
    const double ms = emscripten_get_now() - t0;
    if (ms > 0) best = std::max(best, double(per_task * size_t(tasks) * 4) / (ms * 1e6));
  }
  volatile float sink = 0;  // the sums are used: no pass can be dropped
  for (float s : sums) sink = sink + s;
  return best;
}
