// The validated, normalised form of one attention call. Built once at the public boundary
// (validate.cpp); the kernel and the reference only read it and never re-check arguments.
// Semantics: docs/semantics.md, "Bad input".
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
#include "problem/key_source.hpp"

namespace maskattn::detail {

// The automatic kernel choice: the decode kernel when a KV head group has at most this many query
// rows (Hq / Hkv x Lq), else the prefill kernel: KV caches of float16, bfloat16, q8 and q4 up to 32
// rows (the decode kernel reads them as stored, integer dot products included; the prefill kernel
// converts them to float); float32 K and V up to each target's decode_rows (maskattn/targets.inc).
constexpr int kDecodeMaxRows = 32;

// Longest sequence (Lq, Lk of a tensor, a cache without a window's positions), and the most
// tokens a window cache may see (its Lk: positions are int32). The public constants (maskattn.hpp)
// are the one definition; JavaScript reads them through max_sequence_length() / max_ring_length().
// Scratch, tiles and split-K chunks of a ring are sized by what it holds, never by Lk.
constexpr int64_t kMaxSequenceLength = maskattn::kMaxSequenceLength;
constexpr int64_t kMaxRingLength = maskattn::kMaxRingLength;

// Largest buffer (in bytes) any tensor, mask, output or cache may need: half the address space
// (2^31 - 1 in wasm32, where size_t is 32-bit), so byte counts and offsets never overflow.
// Published as maskattn::max_buffer_bytes() (JavaScript reads it from there).
constexpr int64_t kMaxBytes = int64_t(std::min<uint64_t>(uint64_t(INT64_MAX), uint64_t(SIZE_MAX)) / 2);

// Problem's parts, one per rule group: each is what one check_* of validate.cpp returns, in the
// order they are checked (an argument's error is reported before a later group's).
// Sizes and where Q, K and V live. group = Hq / Hkv query heads share one key/value head (GQA; 1 = plain MHA).
struct ProblemShape {
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0, Dv = 0, group = 1;
  const float* q = nullptr;
  KeySource kv;  // where K/V rows live (a dense tensor or a KV cache's storage) and their dtypes
  RowMajor3 qs;
};
struct ProblemOutput {
  float* out = nullptr;
  RowMajor3 os;
};
struct MaskRules {
  bool causal = false;
  bool top_left = false;
  const int32_t* key_lengths = nullptr;    // [B] or null (= Lk)
  const int32_t* query_lengths = nullptr;  // [B] or null (= Lq)
  MaskView<uint8_t> allowed;               // data null = none
  MaskView<float> bias;                    // data null = none
  int64_t window_left = -1, window_right = -1;
  int64_t prefix = 0;
};
struct SegmentRules {
  const int32_t* query_segments = nullptr;  // [B, Lq] or null
  const int32_t* key_segments = nullptr;    // [B, Lk] or null
};
// Per-head logit terms and the tree.
struct HeadRules {
  const float* alibi_slopes = nullptr;      // [Hq] or null
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
};
// RoPE (validated, dims resolved), for the reference only: execute() (dispatch/execute.cpp) gives
// the kernels rotated copies of Q (and K) and clears it. Query row i of sequence b sits at position
// rope_q_position(b, i), key j at j (both plus rope->offset); rope_keys false: K is stored rotated.
struct RopeRules {
  std::optional<Rope> rope;
  bool rope_keys = false;
  const int32_t* rope_q_ends = nullptr;  // [B] (a cache's lengths): row i at ends[b] - Lq + i; null: Lk - Lq + i
};
struct RunSettings {
  FullyMasked policy = FullyMasked::zero;
  int threads = 1;
  const Executor* executor = nullptr;  // null = the process default
  Kernel kernel = Kernel::automatic;
  Stats* stats = nullptr;
};
// Optional outputs (contiguous).
struct ExtraOutputRows {
  float* weights = nullptr;  // [B, Hq, Lq, Lk]
  float* lse = nullptr;      // [B, Hq, Lq]
};

struct Problem : ProblemShape, ProblemOutput, MaskRules, SegmentRules, HeadRules, RopeRules, RunSettings,
                 ExtraOutputRows {
  float scale = 1.0f;
  float softcap = 0.0f;  // 0 = off

  int64_t rope_q_position(int64_t b, int64_t i) const { return (rope_q_ends ? rope_q_ends[b] : Lk) - Lq + i; }
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
};

// Checks one view (shape, strides, null data, buffer size), naming it in the error.
void check_view(const ConstTensor& t, const std::string& name);
void check_view(const HalfTensor& t, const std::string& name);
// The product of dims, failing (naming `name`) if elements of element_bytes would overflow memory.
int64_t checked_elements(std::initializer_list<int64_t> dims, int64_t element_bytes, const std::string& name);

// Validates every argument (throwing ArgumentError that names it) and returns the normalised
// problem. Nothing is written. `out` is null for the reference API, which returns its results.
// attention(): K and V are dense float tensors.
Problem make_problem(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                     const MutableTensor* out, const Options& options, const ExtraOutputs& extra);
// Any key source (a KV cache's storage): a cache's own rules (its lengths, ring window, RoPE; a
// mismatch with its shape is the query's error) come from the source.
Problem make_problem(const ConstTensor& q, const KeySource& kv, const MutableTensor* out, const Options& options,
                     const ExtraOutputs& extra);

// merge_attention's arguments: at least one part, each part's output a valid view of parts[0]'s
// shape with its lse, and out of that shape too. Returns whether there are rows to merge.
bool check_merge(Span<AttentionPart> parts, const MutableTensor& out);

// ---- The mask builders' arguments (maskattn/masks.hpp): each returns the elements its mask has.
size_t check_causal_mask(int64_t Lq, int64_t Lk, Align align);
size_t check_window_mask(int64_t Lq, int64_t Lk, int64_t left, int64_t right, Align align);
size_t check_padding_mask(const std::vector<int32_t>& lengths, int64_t L);
void check_document_lengths(const std::vector<int32_t>& lengths, int64_t L);  // segments_from_lengths
void check_key_padding(const uint8_t* ignore, size_t n);

// ---- A KV cache's input (validate_cache.cpp).
// Its configuration (KVCache's constructor, before any storage exists), returned with value_dim,
// key_dtype, value_dtype and the rope's dims resolved. Whether it fits in memory is the storage's
// to find (its rows' bytes are the dtype's row traits').
KVCacheConfig check_cache_config(const KVCacheConfig& config);
// "float32, float16, q8, q4 or bfloat16": the cache dtypes (maskattn/kv_types.inc) that keep says
// yes to (all when null), for error messages.
std::string kv_type_list(bool (*keep)(KVType) = nullptr);
// Its methods' arguments against what it holds: held[b] the positions sequence b has seen,
// first[b] the lowest window position it still holds.
void check_sequence(int64_t b, int64_t batch);
void check_truncate(Span<int32_t> lengths, const std::vector<int32_t>& held);
void check_fork(int64_t src, int64_t dst, const std::vector<int32_t>& held);
void check_keep(int64_t b, Span<int32_t> tree, Span<int32_t> path, const std::vector<int32_t>& held,
                const std::vector<int32_t>& first);
// append(k, v, counts): k [B, Hkv, T, D], v [B, Hkv, T, Dv] of the cache's sizes, counts[b] in
// [0, T], and room for them; take[b] = the positions sequence b gains.
void check_append(const ConstTensor& k, const ConstTensor& v, Span<int32_t> counts, const KVCacheConfig& cfg,
                  const std::vector<int32_t>& held, std::vector<int32_t>& take);
void check_append(const HalfTensor& k, const HalfTensor& v, Span<int32_t> counts, const KVCacheConfig& cfg,
                  const std::vector<int32_t>& held, std::vector<int32_t>& take);

}  // namespace maskattn::detail
