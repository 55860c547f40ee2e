// Scratch memory of one worker: K/V rows of the current (batch, kv head) converted to float (KV
// caches of other dtypes) and the small tiles of one query block. Sized once, before any output is
// written, so running out of memory can never leave a partial result. O(Lk * (D + Dv)) per worker
// at most; never O(Lq * Lk).
#pragma once

#include <cstdint>
#include <vector>

#include "base/cache_line.hpp"
#include "kernel/softmax_row.hpp"
#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

// Every array starts on a cache line: the kernels' vector loads and stores of scores, query
// copies and output rows never straddle two lines.
struct Workspace {
  // Prefill (kernel/prefill_kernel.hpp: blocks of QR rows, NB blocks a super-block, KT-key tiles).
  LineVector<float> ktiles;     // [tiles][KT][D]: key rows as float (KV caches of other dtypes)
  LineVector<float> vtiles;     // [tiles][KT][Dv]: value rows as float
  LineVector<uint8_t> tile_flags;  // [tiles]: converted / V finiteness, for the current (b, kv head)
  LineVector<int32_t> seg_min, seg_max;  // [tiles]: key segment id range per tile
  LineVector<float> qblock;     // [NB][D][QR]: query rows transposed
  LineVector<float> row_state;  // [NB][3][QR]: each row's running max, sum and has_key (1/0)
  LineVector<float> edge_rows;  // [NK][D + Dv]: a key group's K and V rows copied (a cut, the last keys)
  // Shared by both kernels: prefill [NB][Dv][QR] (transposed) / decode [rows][dv_pad] outputs; the
  // element-wise mask (decode [rows][KT]; prefill: tile_bits) and bias of a tile (prefill [KT][QR]
  // transposed, decode [rows][KT]); scores
  // (decode [rows][KT]; prefill: row-major temporaries, 2 x [QR][max(KT, Dv)]).
  LineVector<float> oacc;
  LineVector<float> valid;
  // Prefill: a mixed tile's element-wise rules as bits, [KT / 32][QR] (bit j % 32 of word
  // [j / 32][r]: row r may attend the tile's key j).
  LineVector<uint32_t> tile_bits;
  LineVector<float> bias_tile;
  LineVector<float> scores;
  LineVector<float> mean_v;     // [Dv]: mean of V over all keys (uniform policy)
  // Decode over quantized keys: the block's query rows quantized (kernel/quant_dot.hpp).
  LineVector<uint8_t> query_blocks;
  bool mean_v_ready = false;
  // The decode call this workspace serves (run_decode numbers each with next_call(); 0 = none),
  // and the rows whose quantized queries query_blocks holds: made in call queries_call for (b, kv
  // head, first row).
  uint64_t call = 0, queries_call = 0;
  int64_t queries_b = -1, queries_hkv = -1, queries_r0 = -1;
  // Split-K partial results of the decode kernel (unnormalised output rows and their states).
  LineVector<float> partial_o;
  LineVector<SoftmaxRow> partial_states;
  int64_t b = -1, hkv = -1;
  Stats stats;

  // Out of line (kernel/workspace.cpp, baseline flags): the growth code must not be an inline copy
  // compiled with some kernel's AVX flags (see base/arch_namespace.hpp).
  // The decode kernel: `rows` rows of `kt`-key tiles, outputs padded to dv_pad.
  void reserve(int64_t kt, int64_t dv_pad, int64_t rows, int64_t dv);
  // The prefill kernel; convert_d / convert_dv: row widths of converted K / V tiles (0 = read in place).
  void reserve_prefill(int64_t tiles, int64_t kt, int64_t convert_d, int64_t convert_dv, int64_t d, int64_t dv,
                       int64_t nb, int64_t qr, int64_t nk);
  void reserve_partials(int64_t floats, int64_t rows);
  // A number no other call in the process gets: one counter for every target (the workspaces are
  // shared by all of them: a per-target counter once let one target's call reuse another's queries).
  static uint64_t next_call();
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
