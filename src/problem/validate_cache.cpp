// A KV cache's user input, checked before the cache allocates or writes anything: its
// configuration (check_cache_config) and its methods' arguments against what it holds (append,
// truncate, fork, keep, a sequence index). The storage (cache/kv_storage.hpp) then only assumes.
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "problem/problem.hpp"
#include "problem/rope.hpp"

namespace maskattn::detail {

std::string kv_type_list(bool (*keep)(KVType)) {
  std::vector<const char*> names;
  for (KVType t : kKVTypes)
    if (!keep || keep(t)) names.push_back(kv_type_name(t));
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return s;
}

namespace {

// The dtype descriptor's answers (maskattn/kv_types.inc and the row traits, via kv_type_info):
// bits 0 for a value outside the enum.
bool known_kv_type(KVType t) { return kv_type_info(t).bits != 0; }
bool quantized_kv_type(KVType t) { return kv_type_info(t).quantized; }
bool raw_bits_kv_type(KVType t) { return kv_type_info(t).raw_bits; }

// dtype, key_dtype, value_dtype and key_rotation; the key and value dtypes resolved. Whether keys
// are stored rotated is the storage's choice (KeyRotation::automatic asks the dtype's traits, which
// rotate only quantized keys of an even head_dim): only hadamard asked for by name can be refused.
void check_cache_dtypes(KVCacheConfig& c) {
  if (!known_kv_type(c.dtype)) fail_type("dtype", cat("must be ", kv_type_list(), ", given ", int(c.dtype)));
  if (c.key_dtype && !known_kv_type(*c.key_dtype))
    fail_type("key_dtype", cat("must be ", kv_type_list(), ", given ", int(*c.key_dtype)));
  if (c.value_dtype && !known_kv_type(*c.value_dtype))
    fail_type("value_dtype", cat("must be ", kv_type_list(), ", given ", int(*c.value_dtype)));
  const KVType kt = c.key_dtype.value_or(c.dtype);
  c.key_dtype = kt;
  c.value_dtype = c.value_dtype.value_or(c.dtype);
  if (c.key_rotation != KeyRotation::automatic && c.key_rotation != KeyRotation::none &&
      c.key_rotation != KeyRotation::hadamard)
    fail_type("key_rotation", cat("must be automatic, none or hadamard, given ", int(c.key_rotation)));
  if (c.key_rotation != KeyRotation::hadamard) return;
  if (!quantized_kv_type(kt))
    fail("key_rotation", cat("hadamard rotates keys before quantizing them: it needs key dtype ",
                             kv_type_list(quantized_kv_type), ", given ", kv_type_name(kt)));
  if (c.head_dim % 2 != 0) fail("key_rotation", cat("hadamard needs an even head_dim, given ", c.head_dim));
}

}  // namespace

KVCacheConfig check_cache_config(const KVCacheConfig& config) {
  KVCacheConfig c = config;
  if (c.batch < 1) fail("batch", cat("must be >= 1, given ", c.batch));
  if (c.kv_heads < 1) fail("kv_heads", cat("must be >= 1, given ", c.kv_heads));
  if (c.capacity < 1) fail("capacity", cat("must be >= 1, given ", c.capacity));
  if (c.capacity > kMaxSequenceLength) fail("capacity", cat("must be <= ", kMaxSequenceLength, ", given ", c.capacity));
  if (c.head_dim < 1) fail("head_dim", cat("must be >= 1, given ", c.head_dim));
  if (c.value_dim == -1) c.value_dim = c.head_dim;
  if (c.value_dim < 1) fail("value_dim", cat("must be >= 1 (or -1 for head_dim), given ", c.value_dim));
  check_cache_dtypes(c);
  if (c.window < 0) fail("window", cat("must be >= 0 (0 = no window), given ", c.window));
  if (c.sink_tokens < 0) fail("sink_tokens", cat("must be >= 0, given ", c.sink_tokens));
  if (c.sink_tokens > 0 && c.window == 0)
    fail("sink_tokens", cat("keeps the first positions beside a sliding window: it needs a window (a cache "
                            "without one keeps every position), given ", c.sink_tokens, " with window 0"));
  if (c.window > 0 && c.capacity < c.window + c.sink_tokens)
    fail("capacity", cat("must be >= window + sink tokens = ", c.window + c.sink_tokens,
                         " for a sliding-window cache, given ", c.capacity));
  if (c.rope) c.rope = check_rope(*c.rope, c.head_dim, "rope");  // dims resolved
  if (c.page_size < 0 || c.page_size > kMaxSequenceLength)
    fail("page_size", cat("must be in [0, ", kMaxSequenceLength, "] (0 = not paged), given ", c.page_size));
  return c;
}

// ---- A cache's methods, against what it holds (lengths[b]: positions seen, first[b]: the lowest
// window position held).

void check_sequence(int64_t b, int64_t batch) {
  if (b < 0 || b >= batch) fail("b", cat("must be in [0, batch = ", batch, "), given ", b));
}

void check_truncate(Span<int32_t> lengths, const std::vector<int32_t>& held) {
  const int64_t B = int64_t(held.size());
  if (lengths.data == nullptr || int64_t(lengths.size) != B)
    fail("lengths", cat("length must be the batch size ", B, ", given ", lengths.size));
  for (int64_t b = 0; b < B; ++b)
    if (lengths[size_t(b)] < 0 || lengths[size_t(b)] > held[size_t(b)])
      fail(cat("lengths[", b, "]"), cat("must be in [0, current length ", held[size_t(b)], "], given ",
                                        lengths[size_t(b)]));
}

void check_fork(int64_t src, int64_t dst, const std::vector<int32_t>& held) {
  const int64_t B = int64_t(held.size());
  if (src < 0 || src >= B) fail("src", cat("must be a sequence in [0, batch = ", B, "), given ", src));
  if (dst < 0 || dst >= B) fail("dst", cat("must be a sequence in [0, batch = ", B, "), given ", dst));
  if (dst == src) fail("dst", cat("must differ from src (both are ", src, ")"));
  if (held[size_t(dst)] != 0)
    fail("dst", cat("sequence ", dst, " holds ", held[size_t(dst)],
                    " positions: fork needs an empty sequence (truncate or reset it first), nothing was changed"));
}

void check_keep(int64_t b, Span<int32_t> tree, Span<int32_t> path, const std::vector<int32_t>& held,
                const std::vector<int32_t>& first) {
  check_sequence(b, int64_t(held.size()));
  if (tree.data == nullptr && tree.size > 0) fail("tree", cat("data is null but size is ", tree.size));
  if (path.data == nullptr && path.size > 0) fail("path", cat("data is null but size is ", path.size));
  const int64_t T = int64_t(tree.size), len = held[size_t(b)], from = first[size_t(b)];
  if (T < 1) fail("tree", "needs at least one node (the parent indices given to attend)");
  if (T > len - from)
    fail("tree", cat("its ", T, " nodes must be the newest positions of sequence ", b, ", which holds ", len - from,
                     " (positions ", from, " to ", len - 1, ")"));
  for (int64_t i = 0; i < T; ++i)
    if (tree[size_t(i)] < -1 || tree[size_t(i)] >= i)
      fail(cat("tree[", i, "]"), cat("node ", i, "'s parent must be -1 (a root) or an earlier node in [0, ", i,
                                     "), given ", tree[size_t(i)]));
  for (size_t k = 0; k < path.size; ++k) {
    const int32_t node = path[k];
    if (node < 0 || node >= T) fail(cat("path[", k, "]"), cat("must be a node in [0, ", T, "), given ", node));
    const int32_t want = k == 0 ? -1 : path[k - 1];
    if (tree[size_t(node)] != want)
      fail(cat("path[", k, "]"),
           k == 0 ? cat("the path must start at a root (parent -1); node ", node, "'s parent is ", tree[size_t(node)])
                  : cat("node ", node, " is not a child of path[", k - 1, "] = ", want, " (its parent is ",
                        tree[size_t(node)], ")"));
  }
}

namespace {

template <class In>
void check_append_views(const TensorView<const In>& k, const TensorView<const In>& v, Span<int32_t> counts,
                        const KVCacheConfig& cfg, const std::vector<int32_t>& held, std::vector<int32_t>& take) {
  check_view(k, "k");
  check_view(v, "v");
  const int64_t B = cfg.batch, H = cfg.kv_heads, D = cfg.head_dim, Dv = cfg.value_dim;
  if (k.shape[0] != B || k.shape[1] != H || k.shape[3] != D)
    fail("k", cat("shape must be [B, Hkv, T, D] = [", B, ", ", H, ", T, ", D, "], given [", k.shape[0], ", ",
                  k.shape[1], ", ", k.shape[2], ", ", k.shape[3], "]"));
  if (v.shape[0] != B || v.shape[1] != H || v.shape[2] != k.shape[2] || v.shape[3] != Dv)
    fail("v", cat("shape must be [B, Hkv, T, Dv] = [", B, ", ", H, ", ", k.shape[2], ", ", Dv, "], given [",
                  v.shape[0], ", ", v.shape[1], ", ", v.shape[2], ", ", v.shape[3], "]"));
  const int64_t T = k.shape[2];
  if (!counts.empty() && int64_t(counts.size) != B)
    fail("counts", cat("length must be the batch size ", B, ", given ", counts.size));
  const bool ring = cfg.window > 0;
  take.assign(size_t(B), 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = counts.empty() ? T : counts[size_t(b)];
    if (n < 0 || n > T) fail(cat("counts[", b, "]"), cat("must be in [0, T = ", T, "], given ", n));
    const int64_t after = int64_t(held[size_t(b)]) + n;
    if (!ring && after > cfg.capacity)
      fail(cat("sequence[", b, "]"),
           cat("sequence ", b, " holds ", held[size_t(b)], " positions; appending ", n, " would need ", after,
               ", capacity is ", cfg.capacity, " (nothing was written; use a larger capacity, or a window for a ring)"));
    // A ring holds its slots whatever it has seen; its positions (int32) count on to 2^31 - 1.
    const int64_t most = ring ? kMaxRingLength : kMaxSequenceLength;
    if (after > most)
      fail(cat("sequence[", b, "]"), cat("sequence ", b, " would reach ", after, " positions, the most is ", most,
                                         ring ? " for a window cache (nothing was written; reset() or truncate() to start over)" : ""));
    take[size_t(b)] = int32_t(n);
  }
}

}  // namespace

void check_append(const ConstTensor& k, const ConstTensor& v, Span<int32_t> counts, const KVCacheConfig& cfg,
                  const std::vector<int32_t>& held, std::vector<int32_t>& take) {
  check_append_views(k, v, counts, cfg, held, take);
}
void check_append(const HalfTensor& k, const HalfTensor& v, Span<int32_t> counts, const KVCacheConfig& cfg,
                  const std::vector<int32_t>& held, std::vector<int32_t>& take) {
  const KVType kt = *cfg.key_dtype, vt = *cfg.value_dtype;
  if (kt != vt || !raw_bits_kv_type(kt))
    fail_type("k", cat("raw 16-bit values (uint16) need a cache whose keys and values are both of one of ",
                       kv_type_list(raw_bits_kv_type), " (the stored bits); this cache is ", kv_type_name(kt), "/",
                       kv_type_name(vt), ": pass floats"));
  check_append_views(k, v, counts, cfg, held, take);
}

}  // namespace maskattn::detail
