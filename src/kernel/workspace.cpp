#include "kernel/workspace.hpp"

#include <algorithm>
#include <atomic>

namespace maskattn::detail {
namespace {
template <class T>
void grow(LineVector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
}
}  // namespace

void Workspace::reserve(int64_t kt, int64_t dv_pad, int64_t rows, int64_t dv) {
  grow(scores, rows * kt);
  grow(oacc, rows * dv_pad);
  grow(valid, rows * kt);
  grow(bias_tile, rows * kt);
  grow(mean_v, dv);
}

void Workspace::reserve_prefill(int64_t tiles, int64_t kt, int64_t convert_d, int64_t convert_dv, int64_t d,
                                int64_t dv, int64_t nb, int64_t qr, int64_t nk) {
  grow(ktiles, tiles * kt * convert_d);
  grow(vtiles, tiles * kt * convert_dv);
  grow(tile_flags, tiles);
  grow(seg_min, tiles);
  grow(seg_max, tiles);
  grow(qblock, nb * qr * d);
  grow(row_state, nb * 3 * qr);
  grow(edge_rows, nk * (d + dv));
  grow(oacc, nb * qr * dv);
  grow(tile_bits, (kt + 31) / 32 * qr);
  grow(bias_tile, kt * qr);
  grow(scores, 2 * qr * std::max(kt, dv));
  grow(mean_v, dv);
}

void Workspace::reserve_query_blocks(int64_t bytes) { grow(query_blocks, bytes); }

uint64_t Workspace::next_call() {
  static std::atomic<uint64_t> calls{0};
  return calls.fetch_add(1, std::memory_order_relaxed) + 1;
}

void Workspace::reserve_partials(int64_t floats, int64_t rows) {
  grow(partial_o, floats);
  grow(partial_states, rows);
}

WorkspacePool::WorkspacePool(int workers) : workspaces_(size_t(workers)) {}

WorkspacePool& WorkspacePool::for_this_thread(int workers) {
  thread_local WorkspacePool pool(0);
  if (pool.size() < workers) pool.workspaces_.resize(size_t(workers));
  for (int w = 0; w < workers; ++w) pool.workspaces_[size_t(w)].stats = Stats{};
  return pool;
}
WorkspacePool::~WorkspacePool() = default;

}  // namespace maskattn::detail
