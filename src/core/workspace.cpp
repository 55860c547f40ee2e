#include "kernel/workspace.hpp"

namespace maskattn::detail {
namespace {
template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
}
}  // namespace

void Workspace::reserve(int64_t tiles, int64_t kt, int64_t d, int64_t dv_pad, int64_t mr, int64_t dv) {
  grow(kpack, tiles * kt * d);
  grow(vpack, tiles * kt * dv_pad);
  grow(packed, tiles);
  grow(seg_min, tiles);
  grow(seg_max, tiles);
  grow(qblock, mr * d);
  grow(scores, mr * kt);
  grow(oacc, mr * dv_pad);
  grow(valid, mr * kt);
  grow(bias_tile, mr * kt);
  grow(mean_v, dv);
  grow(row_scratch, d + dv);
}

void Workspace::reserve_query_blocks(int64_t bytes) { grow(query_blocks, bytes); }

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
