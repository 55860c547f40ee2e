// maskattn: masked scaled-dot-product attention, O = softmax(Q·Kᵀ·scale + M)·V.
//
// The one header C++ users include. Semantics are those of docs/semantics.md (the project's copy of
// the behaviour contract): shapes, which keys a query may attend, fully masked rows, numbers, errors.
//
//   maskattn::Options opt;
//   opt.causal = true;                       // bottom-right aligned by default
//   maskattn::attention(maskattn::bhld(q.data(), B, Hq, Lq, D),
//                       maskattn::bhld(k.data(), B, Hkv, Lk, D),
//                       maskattn::bhld(v.data(), B, Hkv, Lk, Dv),
//                       maskattn::bhld(o.data(), B, Hq, Lq, Dv), opt);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace maskattn {

// ---------------------------------------------------------------------------------------------
// Errors. Every entry point validates all arguments before writing anything.
// ---------------------------------------------------------------------------------------------

// A bad argument: `argument()` names it (e.g. "key_lengths[1]"), `what()` says expected vs given.
// `is_type_error()` separates a wrong kind of value (JS maps it to TypeError) from a wrong
// value or shape (RangeError).
class ArgumentError : public std::invalid_argument {
 public:
  ArgumentError(std::string argument, const std::string& message, bool type_error = false)
      : std::invalid_argument(argument + ": " + message),
        argument_(std::move(argument)),
        type_error_(type_error) {}
  const std::string& argument() const noexcept { return argument_; }
  bool is_type_error() const noexcept { return type_error_; }

 private:
  std::string argument_;
  bool type_error_;
};

// ---------------------------------------------------------------------------------------------
// Tensor views. Logical shape is always [B, H, L, D]; strides (in elements) say where it lives.
// The innermost (D) stride must be 1. `size` is the element count of the underlying buffer, or -1
// when unknown; when known, every element the view addresses is checked to be inside it.
// ---------------------------------------------------------------------------------------------

template <class T>
struct TensorView {
  TensorView() = default;
  // A mutable view converts to a read-only one (so bhld(q.data(), ...) works for inputs).
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  TensorView(const TensorView<U>& other) : data(other.data), size(other.size) {  // NOLINT(implicit)
    for (int d = 0; d < 4; ++d) {
      shape[d] = other.shape[d];
      strides[d] = other.strides[d];
    }
  }

  T* data = nullptr;
  int64_t shape[4] = {0, 0, 0, 0};    // B, H, L, D (logical)
  int64_t strides[4] = {0, 0, 0, 1};  // element strides of B, H, L, D
  int64_t size = -1;                  // buffer length in elements, -1 = unknown
};
using ConstTensor = TensorView<const float>;
using MutableTensor = TensorView<float>;

enum class Layout {
  bhld,  // memory [B, H, L, D], contiguous (PyTorch SDPA, ONNX Attention 4-D)
  blhd,  // memory [B, L, H, D], contiguous (what Q/K/V projections give; FlashAttention)
};

// A view of a contiguous buffer holding logical [B, H, L, D] in the given memory layout.
template <class T>
TensorView<T> make_tensor(T* data, Layout layout, int64_t B, int64_t H, int64_t L, int64_t D,
                          int64_t size = -1) {
  TensorView<T> t;
  t.data = data;
  t.shape[0] = B; t.shape[1] = H; t.shape[2] = L; t.shape[3] = D;
  // Products in unsigned arithmetic: absurd dimensions wrap instead of overflowing (undefined
  // behaviour); attention() rejects such a view by its element count before it looks at strides.
  const auto mul = [](int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); };
  if (layout == Layout::bhld) {
    t.strides[0] = mul(mul(H, L), D); t.strides[1] = mul(L, D); t.strides[2] = D;
  } else {
    t.strides[0] = mul(mul(L, H), D); t.strides[1] = D; t.strides[2] = mul(H, D);
  }
  t.strides[3] = 1;
  t.size = size;
  return t;
}
template <class T>
TensorView<T> bhld(T* data, int64_t B, int64_t H, int64_t L, int64_t D, int64_t size = -1) {
  return make_tensor(data, Layout::bhld, B, H, L, D, size);
}
// Note the argument order follows memory: B, L, H, D.
template <class T>
TensorView<T> blhd(T* data, int64_t B, int64_t L, int64_t H, int64_t D, int64_t size = -1) {
  return make_tensor(data, Layout::blhd, B, H, L, D, size);
}

// A mask tensor broadcastable to [B, Hq, Lq, Lk]: each dimension is either full-size or 1
// (stride 0 = broadcast). The Lk stride must be 0 or 1.
template <class T>
struct MaskView {
  const T* data = nullptr;  // nullptr = no mask
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t strides[4] = {0, 0, 0, 0};
  int64_t size = -1;
  explicit operator bool() const noexcept { return data != nullptr; }
};
// A contiguous mask of the given shape; size-1 dimensions broadcast.
template <class T>
MaskView<T> make_mask(const T* data, int64_t b, int64_t h, int64_t lq, int64_t lk,
                      int64_t size = -1) {
  MaskView<T> m;
  m.data = data;
  m.shape[0] = b; m.shape[1] = h; m.shape[2] = lq; m.shape[3] = lk;
  uint64_t stride = 1;  // unsigned: absurd shapes wrap (attention() rejects them) instead of overflowing
  for (int d = 3; d >= 0; --d) {
    m.strides[d] = m.shape[d] == 1 ? 0 : int64_t(stride);
    stride *= uint64_t(m.shape[d]);
  }
  m.size = size;
  return m;
}

// A read-only span (C++17 has no std::span). Converts from std::vector.
template <class T>
struct Span {
  const T* data = nullptr;
  size_t size = 0;
  Span() = default;
  Span(const T* d, size_t n) : data(d), size(n) {}
  Span(const std::vector<T>& v) : data(v.data()), size(v.size()) {}  // NOLINT(implicit)
  bool empty() const noexcept { return data == nullptr; }
  const T& operator[](size_t i) const { return data[i]; }
};

// ---------------------------------------------------------------------------------------------
// Options: the mask rules (all active rules must allow a pair), the fully-masked-row policy,
// and how to run.
// ---------------------------------------------------------------------------------------------

// Where the causal / window diagonal sits when Lq != Lk.
enum class Align {
  bottom_right,  // d(i) = i + (kLen - qLen): last query sees every key (FlashAttention >= 2.1, KV cache)
  top_left,      // d(i) = i (PyTorch is_causal)
};

// What a row with no key to attend returns.
enum class FullyMasked {
  zero,     // O = 0, weights = 0, lse = -inf (default; never NaN)
  nan,      // O and weights NaN (plain softmax over all -inf; PyTorch < 2.5 parity)
  uniform,  // weights 1/Lk over all keys, O = mean of V (what a -1e9 fill gives)
};

// Which implementation runs. `automatic` picks the widest the CPU supports.
// New targets go at the end: the values are stable.
// avx512vnni: the avx512 kernel plus AVX512-BW/VL/VNNI (vpdpbusd) for the quantized KV caches.
// The kernel targets are the rows of the target table, maskattn/targets.inc.
enum class Target {
  automatic,
  reference,
#define MASKATTN_TARGET(name, ...) name,
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET
};
// Every kernel target (not automatic, not reference): what target_available() may say yes to.
inline constexpr Target kKernelTargets[] = {
#define MASKATTN_TARGET(name, ...) Target::name,
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET
};

// Which kernel runs. `automatic` picks by shape: the decode kernel when a KV head group has few query
// rows (Hq / Hkv x Lq <= decode_max_rows(target, float K/V)), the prefill kernel otherwise. Both
// follow the same contract; forcing one is for tests and benchmarks.
// The kernels are the rows of maskattn/kernels.inc.
enum class Kernel {
#define MASKATTN_KERNEL(name) name,
#include "maskattn/kernels.inc"
#undef MASKATTN_KERNEL
};
// Every Kernel value, automatic first: what Options::kernel may be.
inline constexpr Kernel kKernels[] = {
#define MASKATTN_KERNEL(name) Kernel::name,
#include "maskattn/kernels.inc"
#undef MASKATTN_KERNEL
};

// Sliding window around the diagonal: d(i) - left <= j <= d(i) + right; -1 = unbounded side.
struct Window {
  int64_t left = -1;
  int64_t right = -1;
};

// Rotary position embedding (RoPE), applied to Q and K before Q·Kᵀ (docs/semantics.md, "Rotary
// position embedding"). Pair i = (x, y) of a row at position p becomes
// (x cos a - y sin a, x sin a + y cos a), a = p · theta^(-2i/dims).
enum class RopeLayout {
  halves,       // pairs (i, i + dims/2): GPT-NeoX, Llama
  interleaved,  // pairs (2i, 2i + 1): GPT-J
};
// RoPE scaling as a model's config.json states it (its `rope_scaling` block), with the defaults
// and derived values of the published definitions (docs/semantics.md, "RoPE scaling"). Each changes
// the frequencies inv_freq[i] (i < dims/2) and may scale the rotated pairs by an attention factor.
enum class RopeScalingType {
  none,
  linear,    // inv_freq / factor (positions interpolated)
  dynamic,   // NTK-aware: the base grows once the sequence passes original_max_positions
  llama3,    // Llama 3.1/3.2: low frequencies / factor, high ones kept, a smooth ramp between
  yarn,      // YaRN (Qwen2.5, DeepSeek): a ramp between interpolation and extrapolation, and an
             // attention factor (0.1 ln(factor) + 1 by default)
  longrope,  // Phi-3 LongRoPE: one divisor per pair, short_factor or (past original_max_positions) long_factor
  factors,   // the general form: one divisor per pair (ggml's freq_factors)
};
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 0;                   // linear, dynamic, llama3, yarn: > 0; longrope: max / original positions (0 = 1)
  int64_t original_max_positions = 0;  // dynamic, llama3, yarn, longrope: > 0
  double low_freq_factor = 0, high_freq_factor = 0;  // llama3: 0 < low < high
  double beta_fast = 32, beta_slow = 1;              // yarn: the ramp's ends, in rotations
  std::optional<double> mscale, mscale_all_dim;      // yarn: the attention factor's DeepSeek form
  std::optional<double> attention_factor;            // yarn, longrope, factors: replaces the derived one
  std::vector<double> short_factor, long_factor;     // longrope: dims/2 divisors each
  std::vector<double> freq_factors;                  // factors: dims/2 divisors
};
struct Rope {
  double theta = 10000;  // the base: finite and > 0 (10000 in Llama 2, 500000 in Llama 3)
  int64_t dims = 0;      // rotated leading dimensions: even, <= D; 0 = all of D
  RopeLayout layout = RopeLayout::halves;
  int64_t offset = 0;    // added to every position: an integer in [0, 2^31 - 1]
  RopeScaling scaling;   // none by default
};
// The frequencies a Rope turns pair i (< dims/2) by and the factor its rotated pairs are scaled by,
// for a head dim D and a sequence `length` (positions + offset seen so far: dynamic and longrope
// depend on it). ArgumentError (naming "rope....") if the Rope is not valid for D.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1;
};
RopeFrequencies rope_frequencies(const Rope& rope, int64_t head_dim, int64_t length);

// Tile counters of the fused kernel (one tile = a block of query rows x a block of keys).
struct Stats {
  int64_t tiles_skipped = 0;  // every pair masked: K/V never read
  int64_t tiles_full = 0;     // every pair allowed: no per-element mask work
  int64_t tiles_mixed = 0;    // masked per element
  int threads_used = 0;       // most threads a call used (<= Options::threads; fewer when more do not pay)
};

// ---------------------------------------------------------------------------------------------
// Threads: bring your own (docs/embedding.md). All of maskattn's parallel work goes through an
// Executor: the caller's, per call (Options::executor) or once per process
// (set_default_executor), or maskattn's own pool (the default, builtin_executor()).
// ---------------------------------------------------------------------------------------------

// A host's parallel_for: `parallel_for(count, task)` must call task(i) exactly once for every i in
// [0, count), on any threads (the calling one included), in any order, concurrently or not, and
// return only when every task has returned. maskattn asks for count <= Options::threads tasks;
// each task takes work units from a shared counter until none are left, so a host that runs the
// tasks one after another (a busy pool, or no threads at all) still gets the whole result, and
// results are bitwise the same whoever runs the tasks. Tasks never throw (maskattn catches its
// own errors inside a task and rethrows them on the calling thread once parallel_for returns).
// parallel_for may be called from several application threads at once (one per concurrent
// maskattn call) and must be callable from every thread that calls maskattn. A host that breaks
// this (calls an index twice or outside [0, count), skips one, returns while a task still runs,
// or calls a task after returning) does no work twice and makes the call fail with
// ArgumentError("executor"), saying what it did; the call's outputs are then not to be used.
struct Executor {
  std::function<void(int64_t count, const std::function<void(int64_t index)>& task)> parallel_for;
};

// maskattn's own pool as an Executor (to ask for it per call when a default executor is set).
// Its threads start on the first call that uses them, never before.
const Executor& builtin_executor() noexcept;
// The executor of every call whose Options::executor is null. ArgumentError ("executor") if
// parallel_for is empty. Thread-safe; calls already running keep the executor they started with.
void set_default_executor(const Executor& executor);
// Back to maskattn's own pool.
void reset_default_executor() noexcept;

// maskattn's own pool: how long an idle worker spins (watching for the next call) before it sleeps,
// and how long a caller spins waiting for the workers before it sleeps. Spinning makes a call that
// follows soon after the last one start without a futex wake-up (tens of microseconds in a VM, up
// to hundreds when the core is asleep); it costs CPU time while idle: up to spin_us of a core per
// worker after every call. Process-wide; takes effect from the next wait.
struct ThreadPoolConfig {
  double spin_us = 200;  // [0, 1e6] microseconds; 0 = sleep at once
};
void set_thread_pool_config(const ThreadPoolConfig& config);  // ArgumentError ("spin_us") if out of range
ThreadPoolConfig thread_pool_config() noexcept;
// What maskattn's own pool has done in this process: workers started (they are kept until exit)
// and jobs run on them (calls that used more than one thread of the pool).
struct ThreadPoolInfo {
  int threads_started = 0;
  int64_t jobs = 0;
};
ThreadPoolInfo thread_pool_info() noexcept;

struct Options {
  std::optional<float> scale;      // default 1/sqrt(D) (1 when D == 0)
  bool causal = false;             // j <= d(i)
  Align align = Align::bottom_right;
  Span<int32_t> key_lengths;       // [B]: keys j >= key_lengths[b] are padding
  Span<int32_t> query_lengths;     // [B]: rows i >= query_lengths[b] are padding (attend nothing)
  MaskView<uint8_t> allowed;       // nonzero = may attend
  MaskView<float> bias;            // added to the logits; -inf masks
  Window window;                   // sliding window on the causal diagonal
  int64_t prefix = 0;              // prefix-LM: keys j < prefix are always allowed (with causal/window)
  Span<int32_t> query_segments;    // [B, Lq] segment ids; a pair needs equal ids
  Span<int32_t> key_segments;      // [B, Lk]
  Span<float> alibi_slopes;        // [Hq]: adds -slope[h] * |d(i) - j|
  float softcap = 0;               // > 0: s = softcap * tanh(s / softcap), before bias and masks
  Span<float> sinks;               // [Hq]: learned attention sinks (gpt-oss): head h's softmax denominator
                                   // gains e^(sinks[h] - max), a virtual key whose value is 0; -inf = none
  Span<int32_t> tree;              // [Lq] (every sequence) or [B, Lq]: tree verification. The last Lq keys
                                   // of each sequence are the query nodes; tree[i] is node i's parent
                                   // (-1 = a root, hanging off the earlier keys; else < i). Node i sees
                                   // the keys before the tree, its ancestors and itself
  // RoPE on Q and K: key j sits at position j + offset, query i at (Lk - Lq + i) + offset (the
  // bottom-right rule, fixed by the tensors' lengths: key_lengths and align do not move it). A KV
  // cache has its own (KVCacheConfig::rope) and refuses this one.
  std::optional<Rope> rope;
  FullyMasked fully_masked = FullyMasked::zero;
  Target target = Target::automatic;
  Kernel kernel = Kernel::automatic;
  int threads = 1;                 // most worker threads to use, 1 to kMaxThreads (fewer when more would not pay off);
                                   // results do not depend on it
  const Executor* executor = nullptr;  // who runs the threads' work; null = the process default
                                   // (set_default_executor; maskattn's own pool unless set). Must
                                   // outlive the call
  Stats* stats = nullptr;          // if set, tile counters are added to it
};

// Optional outputs. Each is written only when its pointer is non-null.
struct ExtraOutputs {
  float* weights = nullptr;  // [B, Hq, Lq, Lk] contiguous: the attention probabilities
  int64_t weights_size = -1; // element count of `weights` (-1 = trust the shape)
  float* lse = nullptr;      // [B, Hq, Lq] contiguous: natural-log log-sum-exp of each row's logits
  int64_t lse_size = -1;
};

// O[b, h, i, :] = sum_j softmax_j(s_ij) V[b, h / (Hq/Hkv), j, :]. Throws ArgumentError on bad input
// (before writing anything) and std::bad_alloc if scratch memory cannot be had.
void attention(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
               const MutableTensor& out, const Options& options = {},
               const ExtraOutputs& extra = {});

// One partial result for merge_attention: attention of the same queries over one set of keys.
struct AttentionPart {
  ConstTensor output;          // [B, H, L, Dv], as attention() wrote it
  const float* lse = nullptr;  // [B, H, L] contiguous: the call's ExtraOutputs::lse
};

// Combines partial results over disjoint key sets into the result over their union, exactly as
// split-K combines chunks inside a call (the same code): per row, with m = max lse_i,
//   O = Σ e^(lse_i - m) O_i / Σ e^(lse_i - m),   lse = m + log Σ e^(lse_i - m).
// A part whose lse is -inf for a row (it attended nothing there) contributes nothing, whatever its
// output holds; a row no part attends gets O = 0 and lse = -inf. NaN in a part's lse makes the row
// NaN. out: [B, H, L, Dv] (it may be one of the parts' own buffers, same layout: each row is read
// before it is written); out_lse: [B, H, L] contiguous, or null. Cascade attention: a prefix shared
// by many sequences attended once, each sequence's suffix on its own, merged (docs/semantics.md).
void merge_attention(Span<AttentionPart> parts, const MutableTensor& out, float* out_lse = nullptr);

// ---------------------------------------------------------------------------------------------
// Introspection
// ---------------------------------------------------------------------------------------------

const char* target_name(Target t) noexcept;
const char* kernel_name(Kernel k) noexcept;
// Largest query rows per KV head group (Hq / Hkv x Lq) for which `automatic` picks the decode kernel
// on `target` (automatic = best_target()), for float K/V (attention(), float32 caches) or not
// (float16, q8, q4 caches): 8 / 32 on native SIMD targets, 1 / 32 in WebAssembly SIMD128, 32 / 32
// for the scalar kernel (measured crossovers, README "Which kernel runs").
int decode_max_rows(Target target = Target::automatic, bool float_kv = true) noexcept;
// The target `automatic` resolves to in this process.
Target best_target() noexcept;
// Whether a target can run here (compiled in and supported by the CPU).
bool target_available(Target t) noexcept;
// Float lanes of a target's vectors (1 for scalar and reference).
int target_lanes(Target t) noexcept;
const char* version() noexcept;
// Limits every entry point enforces (ArgumentError beyond them): the most bytes one buffer (tensor,
// mask, output, cache storage) may need, 2^31 - 1 in wasm32 and 2^62 - 1 natively; the longest
// sequence (Lq, Lk, a cache's positions), kMaxSequenceLength = 2^23: what a tensor, a mask or a
// cache without a window holds. A window cache (a ring) holds at most its capacity but counts
// positions on: it may see kMaxRingLength = 2^31 - 1 tokens (positions are int32; the kernels
// form key positions in fp32 lanes relative to each key tile, so they stay exact that far).
// (JavaScript reads them from the module: `ma.limits`.) kMaxThreads: the most Options::threads
// asks for (and the most tasks the built-in executor runs at once).
inline constexpr int64_t kMaxSequenceLength = int64_t(1) << 23;
inline constexpr int64_t kMaxRingLength = (int64_t(1) << 31) - 1;
inline constexpr int kMaxThreads = 1024;
int64_t max_buffer_bytes() noexcept;
int64_t max_sequence_length() noexcept;
int64_t max_ring_length() noexcept;

}  // namespace maskattn

#include "maskattn/kv_cache.hpp"  // KVCache: token-by-token generation
