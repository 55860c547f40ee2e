// KVCache's public methods: each has its arguments checked (problem/validate_cache.cpp: errors name
// the argument) before it writes anything (an append past capacity changes nothing), then works on
// the storage (cache/kv_storage.hpp);
// attend() is the storage as a KeySource through make_problem and execute, as attention() is.
// Semantics: docs/semantics.md, "KV cache" and "Quantized caches".
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "cache/kv_storage.hpp"
#include "dispatch/targets.hpp"
#include "problem/problem.hpp"
#include "problem/rope.hpp"
#include "maskattn/maskattn.hpp"  // with maskattn/kv_cache.hpp

namespace maskattn {
namespace {
using detail::fail;
}  // namespace

KVCache::KVCache(const KVCacheConfig& config) : impl_(new Impl) { impl_->lay_out(detail::check_cache_config(config)); }

KVCache::KVCache(KVCache&&) noexcept = default;
KVCache& KVCache::operator=(KVCache&&) noexcept = default;
KVCache::~KVCache() = default;

// A moved-from cache holds nothing: the accessors answer "empty" (they are noexcept), every other
// call is an ArgumentError naming the cache, never a null dereference.
namespace {
const KVCacheConfig kMovedFromConfig = [] {
  KVCacheConfig c;
  c.batch = c.kv_heads = c.capacity = c.head_dim = c.value_dim = 0;
  return c;
}();
const std::vector<int32_t> kNoLengths;
}  // namespace

KVCache::Impl& KVCache::live() const {
  if (!impl_) fail("cache", "used after it was moved from (a moved-from KVCache holds no storage)");
  return *impl_;
}

const KVCacheConfig& KVCache::config() const noexcept { return impl_ ? impl_->cfg : kMovedFromConfig; }
const std::vector<int32_t>& KVCache::lengths() const noexcept { return impl_ ? impl_->lengths : kNoLengths; }
bool KVCache::keys_rotated() const noexcept { return impl_ && impl_->rotated; }
int64_t KVCache::byte_length() const noexcept {
  if (!impl_) return 0;
  if (impl_->paged()) return int64_t(impl_->pool.size()) * impl_->page_bytes;
  return int64_t(impl_->k.size() + impl_->v.size());
}
const void* KVCache::key_data() const noexcept { return impl_ && !impl_->paged() ? impl_->k.data() : nullptr; }
const void* KVCache::value_data() const noexcept { return impl_ && !impl_->paged() ? impl_->v.data() : nullptr; }

void KVCache::append(const ConstTensor& k, const ConstTensor& v, Span<int32_t> counts) {
  live().append(k, v, counts);
}

void KVCache::append(const HalfTensor& k, const HalfTensor& v, Span<int32_t> counts) {
  live().append(k, v, counts);
}

KVCache::Contents KVCache::read(int64_t b) const {
  const Impl& m = live();
  detail::check_sequence(b, m.cfg.batch);
  Contents out;
  out.sinks = m.lead(b);
  out.start = m.first[size_t(b)];
  out.length = m.lengths[size_t(b)] - out.start;
  const int64_t H = m.cfg.kv_heads, n = out.sinks + out.length;
  out.key.assign(size_t(H * n * m.D()), 0.0f);
  out.value.assign(size_t(H * n * m.Dv()), 0.0f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = i < out.sinks ? i : out.start + i - out.sinks;
      m.read_row(true, b, h, pos, out.key.data() + (h * n + i) * m.D());
      m.read_row(false, b, h, pos, out.value.data() + (h * n + i) * m.Dv());
    }
  return out;
}

void KVCache::truncate(Span<int32_t> lengths) {
  Impl& m = live();
  detail::check_truncate(lengths, m.lengths);
  for (int64_t b = 0; b < m.cfg.batch; ++b) {
    m.lengths[size_t(b)] = lengths[size_t(b)];
    m.first[size_t(b)] = std::min(m.first[size_t(b)], lengths[size_t(b)]);
    m.release_after(b, lengths[size_t(b)]);
  }
}

void KVCache::reset() noexcept {
  if (!impl_) return;
  std::fill(impl_->lengths.begin(), impl_->lengths.end(), 0);
  std::fill(impl_->first.begin(), impl_->first.end(), 0);
  for (int64_t b = 0; b < impl_->cfg.batch; ++b) impl_->release_after(b, 0);
}

void KVCache::fork(int64_t src, int64_t dst) {
  Impl& m = live();
  detail::check_fork(src, dst, m.lengths);
  if (m.paged()) {
    m.release_after(dst, 0);
    for (int64_t i = 0; i < m.pages_per_seq; ++i) {
      const int64_t from = src * m.pages_per_seq + i, to = dst * m.pages_per_seq + i;
      m.table[size_t(to)] = m.table[size_t(from)];
      if (m.table[size_t(to)] >= 0) ++m.refs[size_t(m.table[size_t(to)])];
      m.point(to);
    }
  } else {  // one block: copy the slots src uses
    const int64_t used = m.ring() ? std::min<int64_t>(m.lengths[size_t(src)], m.cap()) : m.lengths[size_t(src)];
    for (int64_t h = 0; h < m.cfg.kv_heads; ++h) {
      const int64_t kfrom = (src * m.cfg.kv_heads + h) * m.cap(), kto = (dst * m.cfg.kv_heads + h) * m.cap();
      std::memcpy(m.k.data() + kto * m.k_row_bytes, m.k.data() + kfrom * m.k_row_bytes, size_t(used * m.k_row_bytes));
      std::memcpy(m.v.data() + kto * m.v_row_bytes, m.v.data() + kfrom * m.v_row_bytes, size_t(used * m.v_row_bytes));
    }
  }
  m.lengths[size_t(dst)] = m.lengths[size_t(src)];
  m.first[size_t(dst)] = m.first[size_t(src)];
}

std::vector<int32_t> KVCache::pages(int64_t b) const {
  const Impl& m = live();
  detail::check_sequence(b, m.cfg.batch);
  if (!m.paged()) return {};
  return std::vector<int32_t>(m.table.begin() + b * m.pages_per_seq, m.table.begin() + (b + 1) * m.pages_per_seq);
}

void KVCache::keep(int64_t b, Span<int32_t> tree, Span<int32_t> path) {
  const int64_t sequence = b;
  Impl& m = live();
  detail::check_keep(sequence, tree, path, m.lengths, m.first);
  const int64_t T = int64_t(tree.size), len = m.lengths[size_t(sequence)];
  // Nodes only move down (path[k] >= k: parents come first), so copying in path order never
  // overwrites a node still to be moved.
  const int64_t base = len - T;
  m.own_positions(sequence, base, base + int64_t(path.size));
  std::optional<detail::RopeRotation> rope;
  std::vector<float> scratch;
  if (m.rope) {
    rope.emplace(*m.rope);
    // (Dynamic and LongRoPE turn the kept rows with the frequencies of the length before keep: the
    // tree's rows were appended up to it.)
    rope->set_length(len + m.rope->offset());
    scratch.resize(size_t(m.D()));
  }
  for (size_t k = 0; k < path.size; ++k)
    if (path[k] != int32_t(k))
      m.move_row(sequence, base + path[k], base + int64_t(k), rope ? &*rope : nullptr, scratch.data());
  m.lengths[size_t(sequence)] = int32_t(base + int64_t(path.size));
  m.release_after(sequence, m.lengths[size_t(sequence)]);
}

Options KVCache::default_options() {
  Options o;
  o.causal = true;
  return o;
}

void KVCache::attend(const ConstTensor& q, const MutableTensor& out) const {
  attend(q, out, default_options());
}

void KVCache::attend(const ConstTensor& q, const MutableTensor& out, const Options& options,
                     const ExtraOutputs& extra) const {
  detail::execute(detail::make_problem(q, live().key_source(), &out, options, extra), options.target);
}

}  // namespace maskattn
