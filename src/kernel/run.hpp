// Drives a whole problem on one architecture: picks the kernel (prefill or decode), cuts the
// problem into work units, decides how many threads pay off, and merges split-K partials.
//
// Results never depend on the thread count: how a row is computed (its key tiles, its split-K
// chunks and their merge order) depends only on the problem, and threads only decide who computes
// which unit.
#pragma once

#include "base/arch_namespace.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <cstdint>
#include <vector>

#include "base/parallel.hpp"
#include "kernel/decode_kernel.hpp"
#include "kernel/online_softmax.hpp"
#include "kernel/prefill_kernel.hpp"
#include "problem/target_rows.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

// ---------------------------------------------------------------------------------------------
// Thread grain: a rough cost of the problem, and no more threads than have work worth a wake-up.
// ---------------------------------------------------------------------------------------------

// Estimated single-thread time in nanoseconds: K/V bytes streamed (decode) or FMAs (prefill).
inline double estimated_ns(const Problem& p, bool decode) {
  const double keys = double(p.kv.held_keys());  // a ring: its slots, not the tokens it has seen
  const double pairs = double(p.B) * double(p.Hq) * double(p.Lq) * keys;
  const double flops = 2.0 * pairs * double(p.D + p.Dv);
  const double kv_bytes = 4.0 * double(p.B) * double(p.Hkv) * keys * double(p.D + p.Dv);
  // ~10 GB/s per thread from memory, ~40 GFLOP/s (masked prefill tiles, scalar tails included).
  return decode ? kv_bytes / 10.0 + flops / 40.0 : flops / 40.0 + kv_bytes / 10.0;
}

// Threads that pay off: each must get at least kMinNsPerThread of work, or the wake-up and the
// shared-cache traffic cost more than they save.
inline int threads_that_pay(const Problem& p, bool decode, int64_t units) {
  constexpr double kMinNsPerThread = 25000;
  const double ns = estimated_ns(p, decode);
  const int64_t by_cost = std::max<int64_t>(1, int64_t(ns / kMinNsPerThread));
  return int(std::max<int64_t>(1, std::min<int64_t>({int64_t(p.threads), by_cost, units})));
}

// Whether the decode kernel runs: few query rows per KV head group (the target table's
// decode_rows, problem/target_rows.hpp, which maskattn::decode_max_rows also reads).
inline bool use_decode(const Problem& p, Target target) {
  if (p.kernel == Kernel::decode || p.kernel == Kernel::decode_split) return true;
  if (p.kernel == Kernel::prefill || p.kernel == Kernel::prefill_split) return false;
  const bool float_kv = reads_directly(p.kv.k_type) && reads_directly(p.kv.v_type);
  return p.group * p.Lq <= decode_rows(target, float_kv);
}

// Key chunks (split-K, both kernels): [lo, hi) each, in key order. They cover the keys any row may
// attend, on a grid of chunk_keys, so they depend on the problem alone. Keys no row attends between
// the rows' prefixes and their main intervals (a ring's sink tokens, far below its window after
// millions of tokens) get no chunk: the chunks' count and the work follow what is attended, never
// the absolute positions.
struct KeyChunk {
  int64_t lo = 0, hi = 0;
};
inline std::vector<KeyChunk> key_chunks(const Problem& p, int64_t chunk_keys) {
  int64_t prefix = 0, lo = INT64_MAX, hi = 0;  // the union of the rows' prefixes, and of their main intervals
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.Lq; ++i) {
      const RowKeys r = row_keys(p, b, i);
      prefix = std::max(prefix, r.prefix_end);
      if (r.hi > r.lo) {
        lo = std::min(lo, r.lo);
        hi = std::max(hi, r.hi);
      }
    }
  std::vector<KeyChunk> chunks;
  // Chunks of [from, to) on the grid (aligned starts: the same tiles whatever the rows).
  auto cut = [&](int64_t from, int64_t to) {
    for (int64_t j = from / chunk_keys * chunk_keys; j < to;) {
      const int64_t next = std::min((j / chunk_keys + 1) * chunk_keys, to);
      chunks.push_back({j, next});
      j = next;
    }
  };
  if (lo >= hi) {
    cut(0, prefix);
  } else if (lo / chunk_keys * chunk_keys <= prefix) {
    cut(0, std::max(prefix, hi));
  } else {
    cut(0, prefix);
    cut(lo, hi);
  }
  if (chunks.empty()) chunks.push_back({0, 0});  // nothing to attend anywhere: one empty chunk still finishes every row
  return chunks;
}

// Key tiles of kt keys the problem holds (a ring: its slots, whatever Lk it has seen), for Stats.
inline int64_t key_tiles(const Problem& p, int64_t kt) { return (p.kv.held_keys() + kt - 1) / kt; }

// Key tiles of kt keys outside every chunk (keys no row may attend): skipped without a visit, for
// Stats. Chunks start on tile boundaries (key_chunks aligns them to a multiple of kt).
inline int64_t tiles_outside_chunks(const Problem& p, const std::vector<KeyChunk>& chunks, int64_t kt) {
  int64_t in_chunks = 0;
  for (const KeyChunk& c : chunks) in_chunks += (c.hi + kt - 1) / kt - c.lo / kt;
  return std::max<int64_t>(0, key_tiles(p, kt) - in_chunks);
}

// Chunk length for split-K: `base` keys, or a multiple of it past kMaxSplitChunks x base keys, so
// that a group has at most about kMaxSplitChunks chunks: their partial rows, held until merged,
// stay a few times the output (a 128K-key decode step would otherwise hold 256 chunks of them).
// Sized by the keys held (a ring's slots), not by the positions seen.
constexpr int64_t kMaxSplitChunks = 32;
inline int64_t split_chunk_keys(const Problem& p, int64_t base) {
  return base * std::max<int64_t>(1, (p.kv.held_keys() + base * kMaxSplitChunks - 1) / (base * kMaxSplitChunks));
}

// ---------------------------------------------------------------------------------------------
// Prefill: units are (batch, kv head, run of query super-blocks). All of a call's (batch, kv head)
// pairs are one job: an encoder batch of 16 sentences x 12 heads is 192 units, not 16.
// ---------------------------------------------------------------------------------------------

// Batches in the order their units are handed out: longest key length first when the lengths
// differ (a padded batch of sentences), so the last units taken are the cheap ones and the
// threads finish together (longest-processing-time-first). Only who computes a unit changes,
// never how, so results stay the same bits.
inline std::vector<int64_t> batches_longest_first(const Problem& p) {
  std::vector<int64_t> order(size_t(p.B));
  for (int64_t b = 0; b < p.B; ++b) order[size_t(b)] = b;
  if (p.key_lengths)
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return p.key_length(x) > p.key_length(y); });
  return order;
}

// Split-K's shared state, both kernels: every unit's partial rows (part_rows states and output
// rows a unit, in the workspace `shared`), one countdown per group, and the weights rows set to
// -inf (they hold logits until the rows are finished; keys no chunk computes stay -inf, so 0).
struct SplitPartials {
  SoftmaxRow* states = nullptr;
  float* o = nullptr;
  std::unique_ptr<std::atomic<int32_t>[]> remaining;
  SplitPartials(const Problem& p, Workspace& shared, int64_t groups, int64_t chunks, int64_t part_rows, int64_t o_stride) {
    const int64_t slots = chunks > 1 ? groups * chunks * part_rows : 0;
    shared.reserve_partials(slots * o_stride, slots);
    states = shared.partial_states.data();
    o = shared.partial_o.data();
    if (chunks > 1) {
      remaining.reset(new std::atomic<int32_t>[size_t(groups)]);
      for (int64_t g = 0; g < groups; ++g) remaining[size_t(g)].store(int32_t(chunks));
    }
    if (p.weights) std::fill(p.weights, p.weights + p.B * p.Hq * p.Lq * p.Lk, kNegInf);
  }
  // Whether the calling unit finished the last chunk of group g (it then merges them all).
  bool last_of(int64_t g) { return remaining[size_t(g)].fetch_sub(1, std::memory_order_acq_rel) == 1; }
};

// Split-K's last step, both kernels: rows [r0, r1) of (b, hkv) held as `chunks` parts of
// part_rows rows (states st, unnormalised outputs o, o_stride floats a row), merged into the first
// part in chunk order, then written (output, lse, weights: write_row_result).
template <class Arch>
void merge_and_write_rows(const Problem& p, Workspace& ws, int64_t b, int64_t hkv, int64_t r0, int64_t r1, int64_t chunks,
                          int64_t part_rows, SoftmaxRow* st, float* o, int64_t o_stride) {
  for (int64_t part = 1; part < chunks; ++part)
    for (int64_t r = 0; r < r1 - r0; ++r)
      OnlineSoftmax<Arch>::merge(st[r], o + r * o_stride, st[part * part_rows + r], o + (part * part_rows + r) * o_stride,
                                 o_stride);
  bool mean_ready = false;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t h = hkv * p.group + r / p.Lq, i = r % p.Lq;
    float* w = p.weights ? p.weights + ((b * p.Hq + h) * p.Lq + i) * p.Lk : nullptr;
    write_row_result<Arch>(p, b, h, i, st[r - r0], o + (r - r0) * o_stride, w, [&]() -> const float* {
      if (!mean_ready) mean_of_values(p, b, hkv, ws.mean_v.data());
      mean_ready = true;
      return ws.mean_v.data();
    });
  }
}

// Split-K for the prefill kernel: a call of fewer (batch, kv head, super-block) units than this
// (speculative verification of a few tokens over a long context, one long sequence of few heads)
// also cuts its keys into chunks of kPrefillChunkKeys, so that a many-core machine has work for
// every core (measured on 16 cores: #9, 8 units, used 8 threads). Decided by the shape alone.
constexpr int64_t kPrefillMinUnits = 16;
constexpr int64_t kPrefillChunkKeys = 512;

template <class Arch>
void run_prefill_split(const Problem& p, const std::vector<KeyChunk>& key_parts);

template <class Arch>
void run_prefill(const Problem& p) {
  using Prefill = PrefillAttention<Arch>;
  const int64_t blocks = Prefill::query_blocks(p.group * p.Lq);  // a kv head's rows: its query heads stacked
  const int64_t heads = p.B * p.Hkv;
  if (p.kernel == Kernel::prefill_split || heads * blocks < kPrefillMinUnits) {
    const std::vector<KeyChunk> key_parts =
        key_chunks(p, p.kernel == Kernel::prefill_split ? Prefill::KT : split_chunk_keys(p, kPrefillChunkKeys));
    if (key_parts.size() > 1) return run_prefill_split<Arch>(p, key_parts);
  }
  const int threads = threads_that_pay(p, false, heads * blocks);
  // More units than threads so a causal problem's uneven blocks balance out.
  const int64_t chunks = threads > 1 ? std::min<int64_t>(blocks, (4 * threads + heads - 1) / heads) : 1;
  const int64_t per_chunk = (blocks + chunks - 1) / chunks;

  WorkspacePool& workspaces = WorkspacePool::for_this_thread(threads);
  for (int w = 0; w < threads; ++w) Prefill(p).reserve(workspaces[w]);
  std::vector<int64_t> order;
  if (threads > 1) order = batches_longest_first(p);

  parallel_for(p.executor, threads, heads * chunks, [&](int worker, int64_t unit) {
    const int64_t head = unit / chunks, chunk = unit % chunks;
    const int64_t b = order.empty() ? head / p.Hkv : order[size_t(head / p.Hkv)];
    const int64_t begin = chunk * per_chunk, end = std::min(blocks, begin + per_chunk);
    if (begin < end) Prefill(p).run(workspaces[worker], b, head % p.Hkv, begin, end);
  });
  if (p.stats) {
    for (int w = 0; w < threads; ++w) add_stats(*p.stats, workspaces[w].stats);
    p.stats->threads_used = std::max(p.stats->threads_used, threads);
  }
}

// Units (batch, kv head, super-block, key chunk); the last chunk of a (head, super-block) to finish
// merges them in chunk order (as run_decode) and writes the rows.
template <class Arch>
void run_prefill_split(const Problem& p, const std::vector<KeyChunk>& key_parts) {
  using Prefill = PrefillAttention<Arch>;
  constexpr int64_t kRows = Prefill::NB * Prefill::QR;  // rows of a super-block
  const int64_t rows = p.group * p.Lq;
  const int64_t slot_rows = std::min(kRows, rows);  // a unit's partial rows
  const int64_t blocks = Prefill::query_blocks(rows), chunks = int64_t(key_parts.size());
  const int64_t groups = p.B * p.Hkv * blocks;  // a group = one super-block of one kv head
  const int threads = threads_that_pay(p, false, groups * chunks);
  const int64_t o_stride = (p.Dv + 15) / 16 * 16;

  WorkspacePool& workspaces = WorkspacePool::for_this_thread(threads);
  for (int w = 0; w < threads; ++w) Prefill(p).reserve(workspaces[w]);
  SplitPartials parts(p, workspaces[0], groups, chunks, slot_rows, o_stride);

  parallel_for(p.executor, threads, groups * chunks, [&](int worker, int64_t unit) {
    Workspace& ws = workspaces[worker];
    const int64_t g = unit / chunks, c = unit % chunks;
    const int64_t head = g / blocks, sb = g % blocks;
    const int64_t b = head / p.Hkv, hkv = head % p.Hkv;
    Prefill(p).run_keys(ws, b, hkv, sb, key_parts[size_t(c)].lo, key_parts[size_t(c)].hi, parts.states + unit * slot_rows,
                        parts.o + unit * slot_rows * o_stride, o_stride);
    if (!parts.last_of(g)) return;
    merge_and_write_rows<Arch>(p, ws, b, hkv, sb * kRows, std::min(rows, (sb + 1) * kRows), chunks, slot_rows,
                               parts.states + g * chunks * slot_rows, parts.o + g * chunks * slot_rows * o_stride, o_stride);
  });
  if (p.stats) {
    for (int w = 0; w < threads; ++w) add_stats(*p.stats, workspaces[w].stats);
    p.stats->threads_used = std::max(p.stats->threads_used, threads);
    // Per query block (super-blocks are whole blocks, so a head has ceil(rows / QR) of them).
    const int64_t query_blocks = (rows + Prefill::QR - 1) / Prefill::QR;
    p.stats->tiles_skipped += p.B * p.Hkv * query_blocks * tiles_outside_chunks(p, key_parts, Prefill::KT);
  }
}

// ---------------------------------------------------------------------------------------------
// Decode: units are (batch, kv head, block of group rows, key chunk). Key chunks (split-K) depend
// only on the problem, so the split is the same whatever the thread count: they cover the keys
// any row may attend, cut every kChunkKeys keys (the decode kernel cuts its tiles where rows stop
// being consecutive in memory: a ring's wrap, a page's end). Each chunk leaves (max, sum, unnormalised output) per row, and whoever finishes a row
// block's last chunk merges its chunks in chunk order, rescaling each by e^(m_i - M), and writes
// the rows.
// ---------------------------------------------------------------------------------------------

template <class Arch>
void run_decode(const Problem& p) {
  using Decode = DecodeAttention<Arch>;
  constexpr int64_t kChunkKeys = 512;  // a few hundred keys: the merge is noise next to the chunk
  const std::vector<KeyChunk> key_parts =
      key_chunks(p, p.kernel == Kernel::decode_split ? Decode::KT : split_chunk_keys(p, kChunkKeys));
  const int64_t chunks = int64_t(key_parts.size());
  const int64_t rows = p.group * p.Lq;
  const int64_t row_blocks = (rows + Decode::kMaxRows - 1) / Decode::kMaxRows;
  const int64_t groups = p.B * p.Hkv * row_blocks;  // a group = one row block of one kv head
  const int threads = threads_that_pay(p, true, groups * chunks);

  WorkspacePool& workspaces = WorkspacePool::for_this_thread(threads);
  const Decode shape(p);
  const uint64_t call = Workspace::next_call();  // prepared queries never outlive their call
  for (int w = 0; w < threads; ++w) {
    shape.reserve(workspaces[w]);
    workspaces[w].call = call;
  }
  const int64_t o_stride = shape.output_stride();
  const int64_t part_rows = std::min<int64_t>(Decode::kMaxRows, rows);  // a unit's partial rows
  SplitPartials parts(p, workspaces[0], groups, chunks, part_rows, o_stride);  // (none unless split)

  parallel_for(p.executor, threads, groups * chunks, [&](int worker, int64_t unit) {
    Workspace& ws = workspaces[worker];
    const int64_t g = unit / chunks, c = unit % chunks;
    const int64_t head = g / row_blocks, rb = g % row_blocks;
    const int64_t b = head / p.Hkv, hkv = head % p.Hkv;
    const int64_t r0 = rb * Decode::kMaxRows, r1 = std::min(rows, r0 + Decode::kMaxRows);
    Decode kernel(p);
    SoftmaxRow local[Decode::kMaxRows];
    SoftmaxRow* st = chunks > 1 ? parts.states + unit * part_rows : local;
    float* o = chunks > 1 ? parts.o + unit * part_rows * o_stride : ws.oacc.data();
    kernel.run(ws, b, hkv, r0, r1, key_parts[size_t(c)].lo, key_parts[size_t(c)].hi, st, o);
    if (chunks > 1) {
      if (!parts.last_of(g)) return;
      st = parts.states + g * chunks * part_rows;
      o = parts.o + g * chunks * part_rows * o_stride;
    }
    merge_and_write_rows<Arch>(p, ws, b, hkv, r0, r1, chunks, part_rows, st, o, o_stride);
  });
  if (p.stats) {
    for (int w = 0; w < threads; ++w) add_stats(*p.stats, workspaces[w].stats);
    p.stats->threads_used = std::max(p.stats->threads_used, threads);
    p.stats->tiles_skipped += groups * tiles_outside_chunks(p, key_parts, Decode::KT);
  }
}

// The whole problem on the kernel of `target` (its row of the target table), instantiated on Arch.
template <class Arch>
void run_attention(const Problem& p, Target target) {
  if (p.B == 0 || p.Hq == 0 || p.Lq == 0) return;
  if (!use_decode(p, target)) return run_prefill<Arch>(p);
  run_decode<Arch>(p);
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
