// Scratch memory of one worker: packed K/V of the current (batch, kv head) and the small tiles of
// one query block. Sized once, before any output is written, so running out of memory can never
// leave a partial result. O(Lk * (D + Dv)) per worker; never O(Lq * Lk).
#pragma once

#include <cstdint>
#include <vector>

#include "kernel/softmax_row.hpp"
#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

struct Workspace {
  std::vector<float> kpack;      // [tiles][KT / PANEL][D][PANEL]: K transposed in panels
  std::vector<float> vpack;      // [tiles * KT][dv_pad]: V rows padded to whole vectors
  std::vector<uint8_t> packed;   // [tiles]: tile already packed for the current (b, kv head)
  std::vector<int32_t> seg_min, seg_max;  // [tiles]: key segment id range per tile
  std::vector<float> qblock;     // [MR][D]
  std::vector<float> scores;     // [MR][KT]: dots, then logits, then probabilities
  std::vector<float> oacc;       // [MR][dv_pad]: unnormalised output rows
  std::vector<float> valid;      // [MR][KT]: element-wise mask of a mixed tile (1 allowed, 0 not)
  std::vector<float> bias_tile;  // [MR][KT]: bias values of a mixed tile
  std::vector<float> mean_v;     // [Dv]: mean of V over all keys (uniform policy)
  std::vector<float> row_scratch;  // [D + Dv]: one K and one V row converted to float (prefill packing)
  // Decode over quantized keys: the block's query rows quantized (kernel/quant_dot.hpp).
  std::vector<uint8_t> query_blocks;
  bool mean_v_ready = false;
  // Split-K partial results of the decode kernel (unnormalised output rows and their states).
  std::vector<float> partial_o;
  std::vector<SoftmaxRow> partial_states;
  int64_t b = -1, hkv = -1;
  Stats stats;

  // Out of line (core/workspace.cpp, baseline flags): the growth code must not be an inline copy
  // compiled with some kernel's AVX flags (see kernel/arch_namespace.hpp).
  void reserve(int64_t tiles, int64_t kt, int64_t d, int64_t dv_pad, int64_t mr, int64_t dv);
  void reserve_partials(int64_t floats, int64_t rows);
  void reserve_query_blocks(int64_t bytes);
};

inline void add_stats(Stats& total, const Stats& s) {
  total.tiles_skipped += s.tiles_skipped;
  total.tiles_full += s.tiles_full;
  total.tiles_mixed += s.tiles_mixed;
}

// One workspace per worker. Constructed and destroyed out of line for the same reason as reserve().
// Each calling thread keeps its pool between calls (grow-only), so small repeated calls do not pay
// for allocating and zeroing scratch every time; it is freed when the thread exits.
class WorkspacePool {
 public:
  explicit WorkspacePool(int workers);
  // The calling thread's pool, with at least `workers` workspaces.
  static WorkspacePool& for_this_thread(int workers);
  ~WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;
  Workspace& operator[](int worker) { return workspaces_[size_t(worker)]; }
  int size() const { return int(workspaces_.size()); }

 private:
  std::vector<Workspace> workspaces_;
};

}  // namespace maskattn::detail
