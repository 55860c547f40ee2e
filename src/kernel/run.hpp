// Drives FusedAttention<Arch> over a whole problem: splits (batch, kv head, query blocks) into work
// units, gives each worker its own workspace (all sized before anything is written) and sums the
// tile counters. Each output row is computed the same way whatever the split, so results do not
// depend on the thread count.
#pragma once

#include "kernel/arch_namespace.hpp"

#include <algorithm>

#include "core/parallel.hpp"
#include "kernel/attention_kernel.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

template <class Arch>
void run_fused_attention(const Problem& p) {
  if (p.B == 0 || p.Hq == 0 || p.Lq == 0) return;
  using Kernel = FusedAttention<Arch>;
  const int64_t blocks = Kernel::query_blocks(p.Lq);
  const int64_t heads = p.B * p.Hkv;
  const int threads = int(std::min<int64_t>(p.threads, heads * blocks));
  // More units than threads so a causal problem's uneven blocks balance out.
  const int64_t chunks = threads > 1 ? std::min<int64_t>(blocks, (4 * threads + heads - 1) / heads) : 1;
  const int64_t per_chunk = (blocks + chunks - 1) / chunks;

  WorkspacePool& workspaces = WorkspacePool::for_this_thread(threads);
  for (int w = 0; w < threads; ++w) Kernel(p).reserve(workspaces[w]);

  parallel_for(threads, heads * chunks, [&](int worker, int64_t unit) {
    const int64_t head = unit / chunks, chunk = unit % chunks;
    const int64_t begin = chunk * per_chunk, end = std::min(blocks, begin + per_chunk);
    if (begin < end) Kernel(p).run(workspaces[worker], head / p.Hkv, head % p.Hkv, begin, end);
  });

  if (p.stats) {
    for (int w = 0; w < threads; ++w) {
      const Stats& s = workspaces[w].stats;
      p.stats->tiles_skipped += s.tiles_skipped;
      p.stats->tiles_full += s.tiles_full;
      p.stats->tiles_mixed += s.tiles_mixed;
    }
  }
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
