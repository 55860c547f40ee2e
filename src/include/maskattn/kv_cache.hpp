// maskattn::KVCache: keys and values of every earlier token, for token-by-token generation.
// Included by maskattn.hpp; semantics in docs/semantics.md ("KV cache").
//
//   maskattn::KVCacheConfig cfg;
//   cfg.batch = 1; cfg.kv_heads = 8; cfg.capacity = 4096; cfg.head_dim = 128;
//   cfg.dtype = maskattn::KVType::float16;          // half the memory and half the bytes to read
//   maskattn::KVCache cache(cfg);
//   cache.append(maskattn::bhld(k, 1, 8, T, 128), maskattn::bhld(v, 1, 8, T, 128));   // prompt
//   cache.attend(maskattn::bhld(q, 1, 32, 1, 128), maskattn::bhld(o, 1, 32, 1, 128)); // causal
//
// Layout (why): per (sequence, kv head), `capacity` rows of D (K) and Dv (V) elements, contiguous,
// so the decode kernel streams each head's keys as one run of memory, as it would read a plain
// [B, Hkv, L, D] tensor; an append writes T rows in place per head, and nothing is moved (but the
// rows keep() compacts). A paged cache (page_size) holds the same rows in pages of P positions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace maskattn {

// The cache dtypes are the rows of maskattn/kv_types.inc: float32, float16, q8, q4, bfloat16 (each
// row says what it stores). f32, f16 and bf16 are earlier spellings of float32, float16, bfloat16.
enum class KVType {
#define MASKATTN_KV_TYPE(name, bits) name,
#define MASKATTN_KV_TYPE_ALIAS(alias, name) alias = name,
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE_ALIAS
#undef MASKATTN_KV_TYPE
};
// Every cache dtype, in the enum's order (a loop over it covers a dtype added later).
inline constexpr KVType kKVTypes[] = {
#define MASKATTN_KV_TYPE(name, bits) KVType::name,
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
};
// "float32", "float16", "q8", "q4", "bfloat16" ("?" for a value outside the enum).
const char* kv_type_name(KVType t) noexcept;
// The dtype a name spells (kv_type_name's, or an earlier spelling: "f16"); nullopt for any other.
std::optional<KVType> kv_type_of(const char* name) noexcept;
// What a dtype is, for code that lists or labels them (the binding publishes it to JavaScript).
struct KVTypeInfo {
  const char* name;  // kv_type_name
  int bits;          // per stored value (a quantized block adds a float32 scale per 32 values)
  bool quantized;    // blocks of 32 with a scale each (docs/semantics.md, "Quantized caches")
  bool raw_bits;     // append() also takes the stored 16-bit values themselves (the uint16_t overload)
};
// A value outside the enum: name "?", bits 0.
KVTypeInfo kv_type_info(KVType t) noexcept;

// A fixed orthogonal rotation of the head dimension (a Hadamard transform with random signs) applied
// to keys before they are quantized and to queries before Q·Kᵀ: q·k is unchanged, and a few outlier
// channels are spread over the whole block, so 4-bit keys keep their accuracy. read() undoes it.
enum class KeyRotation {
  automatic,  // on where the key dtype asks for it (q4), off otherwise
  none,
  hadamard,   // needs a quantized key_dtype; D must be even (rotates blocks of the largest power of 2 dividing D)
};

struct KVCacheConfig {
  int64_t batch = 1;        // B: sequences
  int64_t kv_heads = 1;     // Hkv
  int64_t capacity = 0;     // positions per sequence (with a window: slots of the ring)
  int64_t head_dim = 0;     // D
  int64_t value_dim = -1;   // Dv; -1 = head_dim
  KVType dtype = KVType::float32;
  int64_t window = 0;       // W > 0: sliding-window ring (capacity >= W); attention sees the
                            // newest W positions, appends never run out of room
  // K and V may differ: each defaults to dtype (e.g. dtype q8, value_dtype q4).
  std::optional<KVType> key_dtype, value_dtype;
  KeyRotation key_rotation = KeyRotation::automatic;
  // StreamingLLM sink tokens (needs a window): positions 0..sink_tokens-1 of each sequence are kept
  // forever beside the newest `window`, and attention sees both (capacity >= window + sink_tokens).
  int64_t sink_tokens = 0;
  // P > 0: a paged cache. Memory is taken in pages of P positions (all heads) as sequences grow, and
  // fork() shares pages between sequences (copy on write) instead of copying them. 0: one block of
  // batch x capacity positions, allocated up front (key_data() / value_data() expose it).
  int64_t page_size = 0;
  // RoPE (maskattn.hpp's Rope): keys are rotated by their absolute position (+ offset) when appended
  // and stored rotated (then Hadamard-rotated and quantized for q8/q4); attend() rotates each query
  // row by its own position, lengths[b] - Lq + i (+ offset). read() returns the stored, RoPE-rotated
  // keys. keep() re-rotates the rows it moves to their new positions.
  std::optional<Rope> rope;
};

// Raw IEEE half bits, as a view (same shape and strides rules as float views).
using HalfTensor = TensorView<const uint16_t>;

class KVCache {
 public:
  // Validates the configuration (ArgumentError naming the field) and allocates
  // batch x kv_heads x capacity x (D + Dv) elements (std::bad_alloc if that fails); a paged cache
  // allocates nothing yet (pages come with the appends).
  explicit KVCache(const KVCacheConfig& config);
  // A moved-from cache holds nothing: config(), lengths(), byte_length() and the data pointers
  // answer empty, reset() does nothing, and append, attend and truncate throw ArgumentError("cache").
  KVCache(KVCache&&) noexcept;
  KVCache& operator=(KVCache&&) noexcept;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;
  ~KVCache();

  // value_dim, key_dtype, value_dtype resolved (key_rotation stays as given: see keys_rotated()).
  const KVCacheConfig& config() const noexcept;
  // Whether keys are stored rotated (KeyRotation: hadamard, or automatic with q4 keys).
  bool keys_rotated() const noexcept;

  // Writes new positions at each sequence's current length, in place. k [B, Hkv, T, D] and
  // v [B, Hkv, T, Dv] (any layout/strides); counts[b] <= T: sequence b takes its first counts[b]
  // positions (empty = all T). Past capacity (no window) is an ArgumentError naming the
  // sequence, and nothing is written. q8/q4 rows are quantized here. The uint16_t overload gives
  // the stored bits themselves, for caches whose K and V are both float16 (IEEE halves) or both bfloat16.
  void append(const ConstTensor& k, const ConstTensor& v, Span<int32_t> counts = {});
  void append(const HalfTensor& k, const HalfTensor& v, Span<int32_t> counts = {});

  // Tokens each sequence holds (absolute positions: with a window, tokens seen).
  const std::vector<int32_t>& lengths() const noexcept;
  // Shortens sequences (rollback of rejected speculative tokens); each new length in [0, current].
  void truncate(Span<int32_t> lengths);
  void reset() noexcept;

  // Makes sequence dst hold exactly what sequence src holds (its positions, lengths and ring state);
  // dst must be empty (length 0: reset or truncate it first). A paged cache shares src's pages: O(1)
  // memory, and a later write into a shared page copies that page first, so appending to or
  // truncating either sequence never changes the other. A contiguous cache copies the rows.
  void fork(int64_t src, int64_t dst);

  // After tree verification (Options::tree) over the last tree.size positions of sequence b: keeps
  // the accepted `path` of nodes (a root, then a child of each previous node) by moving their K/V
  // rows into place, so the sequence continues from the path's last node. An empty path drops the
  // whole tree. tree: that sequence's parent indices, as given to attend.
  void keep(int64_t b, Span<int32_t> tree, Span<int32_t> path);

  // A paged cache's page table of sequence b: entry i is the page holding its slots [i P, (i + 1) P)
  // (-1: not taken yet). The same number in two sequences is one shared page. Empty when not paged.
  std::vector<int32_t> pages(int64_t b) const;

  // q [B, Hq, Lq, D] holds each sequence's newest Lq positions (query i of sequence b is at
  // position lengths[b] - Lq + i). Keys are the cache's positions; every Options rule applies on
  // top as in attention() (key_lengths are implied by the cache and must not be given).
  // attend(q, out) is causal; with explicit options, `causal` is what they say
  // (start from default_options() to keep the causal default). Weights are [B, Hq, Lq, max length].
  void attend(const ConstTensor& q, const MutableTensor& out) const;
  void attend(const ConstTensor& q, const MutableTensor& out, const Options& options,
              const ExtraOutputs& extra = {}) const;
  static Options default_options();

  // The dequantized float32 contents sequence b holds: key [Hkv, n, D], value [Hkv, n, Dv]
  // (contiguous), n = sinks + length rows: positions 0 .. sinks-1 (sink tokens a ring kept below its
  // window; 0 otherwise), then start, start + 1, ... in order (a ring keeps the newest only).
  // Keys come back unrotated. For every dtype; float32 returns the stored values exactly.
  struct Contents {
    std::vector<float> key, value;
    int64_t start = 0, length = 0, sinks = 0;
  };
  Contents read(int64_t b) const;

  // Bytes of K/V storage: B x Hkv x capacity x (key row + value row bytes), where a row of n
  // elements takes 4n (float32), 2n (float16, bfloat16), 36 per block of 32 (q8) or 20 per block (q4). Constant
  // for a contiguous cache.
  // A paged cache: the pages it holds (in use or free for reuse) x Hkv x page_size x (both rows).
  int64_t byte_length() const noexcept;
  // The storage, for zero-copy use: K is [B, Hkv, capacity, key row] and V [B, Hkv, capacity, value row],
  // contiguous: float, uint16_t halves, or quantized rows (docs/semantics.md, "Quantized caches");
  // with a window, position p is in slot p % capacity (p < sink_tokens: slot p; later positions:
  // slot S + (p - S) % (capacity - S)). Each block starts on a 64-byte cache line. A paged cache
  // has no single block: null.
  const void* key_data() const noexcept;
  const void* value_data() const noexcept;

 private:
  struct Impl;
  Impl& live() const;  // the state, or an ArgumentError naming "cache" when moved from
  std::unique_ptr<Impl> impl_;
};

// IEEE binary16 conversions: round to nearest even (subnormals, infinities and NaN included).
uint16_t float_to_half(float x) noexcept;
float half_to_float(uint16_t h) noexcept;
// bfloat16 conversions (a float's upper 16 bits): round to nearest even, NaN kept; back is exact.
uint16_t float_to_bfloat16(float x) noexcept;
float bfloat16_to_float(uint16_t b) noexcept;

}  // namespace maskattn
