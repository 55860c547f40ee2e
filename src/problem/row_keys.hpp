// Compact mask rules turned into key intervals per query row (FlashAttention's mask.h idea).
//
// Lengths, causal, sliding window, prefix-LM and a ring's sink tokens together allow, for query row
// i of batch b,
//     keys j in [0, prefix_end)  U  [lo, hi)
// so the kernel can skip whole key tiles outside both intervals and needs per-element masking
// only in tiles an interval edge cuts. Element-wise rules (segments, `allowed`, `bias`) are
// handled on top of this by tile prescans in the kernel.
// Semantics: docs/semantics.md, "Which keys a query may attend".
#pragma once

#include "base/arch_namespace.hpp"

#include <algorithm>
#include <cstdint>

#include "problem/problem.hpp"

namespace maskattn::detail {
inline namespace MASKATTN_KERNEL_NS {

struct RowKeys {
  int64_t lo = 0, hi = 0;    // main interval [lo, hi), empty when hi <= lo
  int64_t prefix_end = 0;    // prefix interval [0, prefix_end)

  bool empty() const { return hi <= lo && prefix_end <= 0; }
  // Smallest interval holding every allowed key.
  int64_t first() const { return prefix_end > 0 ? 0 : lo; }
  int64_t last_exclusive() const { return std::max(hi, prefix_end); }
  bool allows(int64_t j) const { return j < prefix_end || (j >= lo && j < hi); }
  // Whether every key of [j0, j1) is allowed / none is.
  bool covers(int64_t j0, int64_t j1) const {
    if (j1 <= prefix_end) return true;
    if (j0 >= lo && j1 <= hi) return true;
    // The union is the single interval [0, max(hi, prefix_end)) when the prefix reaches lo.
    return prefix_end >= lo && j1 <= std::max(hi, prefix_end);
  }
  bool misses(int64_t j0, int64_t j1) const {
    return j0 >= prefix_end && (hi <= lo || j1 <= lo || j0 >= hi);
  }
};

inline RowKeys row_keys(const Problem& p, int64_t b, int64_t i) {
  RowKeys r;
  if (i >= p.query_length(b)) return r;  // padding query row: attends nothing
  const int64_t klen = p.key_length(b);
  const int64_t d = i + p.diagonal_offset(b);
  int64_t lo = 0, hi = klen;
  if (p.causal) hi = std::min(hi, d + 1);
  if (p.window_left >= 0) lo = std::max(lo, d - p.window_left);
  if (p.window_right >= 0) hi = std::min(hi, d + p.window_right + 1);
  // lo may lie past the valid keys (a window left of a diagonal beyond kLen, top-left): clamp it
  // so that an empty main interval never reaches beyond kLen either. Callers read keys up to
  // last_exclusive() (the decode kernel's key chunks): with lo unclamped, a row whose prefix kept
  // it non-empty made them read K and V rows past Lk (found by tests/fuzz).
  r.lo = std::min(std::max<int64_t>(lo, 0), klen);
  r.hi = std::max(hi, r.lo);
  // The prefix only widens a rule that restricts keys (causal or window).
  if (p.prefix > 0 && (p.causal || p.has_window())) r.prefix_end = std::min(p.prefix, klen);
  // A ring's sink tokens: always visible beside its window, but never ahead of the query (the
  // ring's rule is j <= d(i)): a causal prefix, unlike the prefix-LM's bidirectional one.
  if (p.kv.sink_tokens > 0) r.prefix_end = std::max(r.prefix_end, std::min({p.kv.sink_tokens, klen, std::max<int64_t>(d + 1, 0)}));
  return r;
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
