// The validated, normalised form of one attention call. Built once at the public boundary
// (validate.cpp); the kernel and the reference only read it and never re-check arguments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <climits>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

// Element strides of a [B, H, L, D] view whose innermost stride is 1.
struct RowMajor3 {
  int64_t b = 0, h = 0, l = 0;
};

// The automatic kernel choice: the decode kernel when a KV head group has at most this many query
// rows (Hq / Hkv x Lq), else the prefill kernel. Measured crossovers (README "Which kernel runs"):
// KV caches of float16, q8 and q4 up to 32 rows (the decode kernel reads them as stored, integer dot
// products included; the prefill kernel converts them to float); float K and V up to 8 rows on
// native SIMD targets, and only single rows in WebAssembly SIMD128 (whose prefill kernel, rows in
// lanes, is 1.9x the decode kernel at 4 rows: GQA decode). The scalar kernel keeps 32.
constexpr int kDecodeMaxRows = 32;
constexpr int kDecodeMaxRowsFloat = 8;
constexpr int kDecodeMaxRowsFloatWasm = 1;

// Longest sequence (Lq, Lk, a cache's positions): the kernels form key positions in fp32 lanes,
// exact below 2^23. The public maskattn::kMaxSequenceLength (maskattn.hpp), the one definition;
// JavaScript reads it through maskattn::max_sequence_length().
constexpr int64_t kMaxSequenceLength = maskattn::kMaxSequenceLength;

// Largest buffer (in bytes) any tensor, mask, output or cache may need: half the address space
// (2^31 - 1 in wasm32, where size_t is 32-bit), so byte counts and offsets never overflow.
// Published as maskattn::max_buffer_bytes() (JavaScript reads it from there).
constexpr int64_t kMaxBytes = int64_t(std::min<uint64_t>(uint64_t(INT64_MAX), uint64_t(SIZE_MAX)) / 2);

struct Problem {
  // Sizes. group = Hq / Hkv query heads share one key/value head (GQA; 1 = plain MHA).
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0, Dv = 0, group = 1;

  const float* q = nullptr;
  // Float K/V (plain attention, f32 caches). A KV cache of another dtype leaves them null and sets
  // k_stored / v_stored: rows of k_type / v_type (kernel/quant.hpp), strides in elements (f16) or
  // bytes (q8, q4); keys_rotated: stored keys are R·k (the kernel rotates the queries the same way).
  const float* k = nullptr;
  const float* v = nullptr;
  KVType k_type = KVType::f32, v_type = KVType::f32;
  const void* k_stored = nullptr;
  const void* v_stored = nullptr;
  bool keys_rotated = false;
  // A ring of key_ring slots (sliding-window KV cache) after key_ring_base fixed ones (sink tokens):
  // key j < key_ring_base is slot j, a later key is slot base + (j - base) % key_ring. 0 = none.
  int64_t key_ring = 0, key_ring_base = 0;
  // A paged KV cache: slot s of sequence b is row s % page_keys of the page at
  // k_pages / v_pages[b * pages_per_seq + s / page_keys] (strides ks / vs: .h within a page, .l a row).
  // Null = one block addressed by the strides from k / k_stored.
  const uint8_t* const* k_pages = nullptr;
  const uint8_t* const* v_pages = nullptr;
  int64_t page_keys = 0, pages_per_seq = 0;
  // KV cache semantics for the `uniform` policy: average V over the positions sequence b holds,
  // [key_first[b], key_length(b)), not over all Lk (key_first null = from 0).
  bool uniform_over_key_lengths = false;
  const int32_t* key_first = nullptr;
  // A ring's sink tokens (KV cache): keys j < key_sinks are visible to row i whenever j <= d(i),
  // beside the window (problem/row_keys.hpp); with key_first, positions [0, min(key_sinks, first)) are
  // held too (the uniform policy's average).
  int64_t key_sinks = 0;
  float* out = nullptr;
  RowMajor3 qs, ks, vs, os;

  float scale = 1.0f;

  // Mask rules.
  bool causal = false;
  bool top_left = false;
  const int32_t* key_lengths = nullptr;    // [B] or null (= Lk)
  const int32_t* query_lengths = nullptr;  // [B] or null (= Lq)
  MaskView<uint8_t> allowed;               // data null = none
  MaskView<float> bias;                    // data null = none
  int64_t window_left = -1, window_right = -1;
  int64_t prefix = 0;
  const int32_t* query_segments = nullptr;  // [B, Lq] or null
  const int32_t* key_segments = nullptr;    // [B, Lk] or null
  const float* alibi_slopes = nullptr;      // [Hq] or null
  float softcap = 0.0f;                     // 0 = off
  const float* sinks = nullptr;             // [Hq] or null; -inf entries = no sink
  // Tree verification: the last Lq keys of sequence b (from tree_start(b)) are the query nodes. Node t
  // is an ancestor-or-self of node i iff tree_in[t] <= tree_in[i] < tree_out[t] (pre-order numbers and
  // subtree ends, computed once in validate.cpp, so no Lq x Lk mask exists). Per batch when
  // tree_per_batch, else shared. tree_parents: the caller's parent indices (the reference walks them).
  const int32_t* tree_parents = nullptr;
  const int32_t* tree_in = nullptr;
  const int32_t* tree_out = nullptr;
  bool tree_per_batch = false;
  std::shared_ptr<const std::vector<int32_t>> tree_order;  // owns tree_in / tree_out
  FullyMasked policy = FullyMasked::zero;
  // RoPE (validated, dims resolved), for the reference only: attention() and KVCache::attend give the
  // kernels rotated copies of Q (and K) and clear it. Query row i of sequence b sits at position
  // rope_q_position(b, i), key j at j (both plus rope->offset); rope_keys false: K is stored rotated.
  std::optional<Rope> rope;
  bool rope_keys = false;
  const int32_t* rope_q_ends = nullptr;  // [B] (a cache's lengths): row i at ends[b] - Lq + i; null: Lk - Lq + i
  int64_t rope_q_position(int64_t b, int64_t i) const { return (rope_q_ends ? rope_q_ends[b] : Lk) - Lq + i; }

  // Optional outputs (contiguous) and run settings.
  float* weights = nullptr;  // [B, Hq, Lq, Lk]
  float* lse = nullptr;      // [B, Hq, Lq]
  int threads = 1;
  const Executor* executor = nullptr;  // null = the process default
  Kernel kernel = Kernel::automatic;
  Stats* stats = nullptr;

  int64_t key_length(int64_t b) const { return key_lengths ? key_lengths[b] : Lk; }
  int64_t query_length(int64_t b) const { return query_lengths ? query_lengths[b] : Lq; }
  // d(i) = i + diagonal_offset(b): bottom-right alignment uses the valid lengths.
  int64_t diagonal_offset(int64_t b) const {
    return top_left ? 0 : key_length(b) - query_length(b);
  }
  bool has_window() const { return window_left >= 0 || window_right >= 0; }
  // Rules decided per (row, key) element: they make a tile an edge cuts `mixed`.
  bool has_elementwise_rules() const { return allowed || bias || query_segments || tree_parents; }
  int64_t tree_start(int64_t b) const { return key_length(b) - Lq; }
  const int32_t* tree_row(const int32_t* t, int64_t b) const { return t + (tree_per_batch ? b * Lq : 0); }
  int64_t key_slot(int64_t j) const {
    return key_ring && j >= key_ring_base ? key_ring_base + (j - key_ring_base) % key_ring : j;
  }
  // How many keys from j on have consecutive rows in memory (a ring's wrap, the end of the fixed
  // slots and a page's end cut runs): the decode kernel's tiles never cross such a cut.
  int64_t contiguous_keys(int64_t j) const {
    int64_t run = int64_t(1) << 40;  // beyond any key index (no overflow in j + run)
    const int64_t slot = key_slot(j);
    if (key_ring) run = j < key_ring_base ? key_ring_base - j : key_ring_base + key_ring - slot;
    if (page_keys) run = std::min(run, page_keys - slot % page_keys);
    return run;
  }
  // K/V rows of key j in storage, in their own units (bytes for the quantized types).
  const void* key_row(int64_t b, int64_t h, int64_t j) const {
    return stored_row(k, k_stored, k_pages, k_type, ks, b, h, j);
  }
  const void* value_row(int64_t b, int64_t h, int64_t j) const {
    return stored_row(v, v_stored, v_pages, v_type, vs, b, h, j);
  }

 private:
  const void* stored_row(const float* f, const void* stored, const uint8_t* const* pages, KVType t,
                         const RowMajor3& s, int64_t b, int64_t h, int64_t j) const {
    const int64_t slot = key_slot(j);
    const void* base = f ? static_cast<const void*>(f) : stored;
    int64_t off = b * s.b + h * s.h + slot * s.l;
    if (pages) {
      base = pages[b * pages_per_seq + slot / page_keys];
      off = h * s.h + (slot % page_keys) * s.l;
    }
    if (t == KVType::f32) return static_cast<const float*>(base) + off;
    if (t == KVType::f16) return static_cast<const uint16_t*>(base) + off;
    return static_cast<const uint8_t*>(base) + off;
  }
};

// Checks one view (shape, strides, null data, buffer size), naming it in the error.
void check_view(const ConstTensor& t, const std::string& name);
void check_view(const HalfTensor& t, const std::string& name);
// The product of dims, failing (naming `name`) if elements of element_bytes would overflow memory.
int64_t checked_elements(std::initializer_list<int64_t> dims, int64_t element_bytes, const std::string& name);

// Validates every argument (throwing ArgumentError that names it) and returns the normalised
// problem. Nothing is written. `need_outputs` is false for the reference, which returns its results.
Problem make_problem(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                     const MutableTensor* out, const Options& options, const ExtraOutputs& extra);

}  // namespace maskattn::detail
