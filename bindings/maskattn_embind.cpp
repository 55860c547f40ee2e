// Embind layer: thin on purpose. JavaScript (js/wasm-call.js, the wire protocol) places tensors in wasm memory and passes
// their addresses and shapes; the library's own validation checks everything, and every C++
// exception is caught here and turned into a status code plus message, so a bad argument or an
// out-of-memory never aborts the module and it stays usable.
//
// Two families of entry points: attention(args) (one call, everything in the args block), and the
// KV cache: kvCreate/kvDestroy manage maskattn::KVCache objects that live here, in wasm memory, and
// are named by integer handles; kvAppend/kvAttend take the same args block as attention().
#include <emscripten/bind.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <malloc.h>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <maskattn/maskattn.hpp>

namespace {

// One call's arguments, passed as a flat float64 block in wasm memory that JavaScript fills by
// name: the field list below is the single definition of the layout, published to JS once by
// callArgsLayout(). (Embind value_object conversion cost ~20 us per call, most of a small call.)
// Addresses are byte offsets into wasm memory (0 = absent); each tensor's own logical dims
// [B, H, L, D] are passed so that the library's validation sees any mismatch; layout 0 = bhld,
// 1 = blhd. Mask shapes are already 4-D (JS pads them). Sizes are element counts: the real length
// of the block JS copied each array into (never derived from a shape here), so the library checks
// every view, mask and span against the memory that is really there.
// KV cache calls use the same block: kvAppend reads k, v (with `half` = 1 when they are raw IEEE
// halves) and `counts`; kvAttend reads everything attention() reads but k and v (the cache holds
// them; kL is the cache's key axis, max(lengths), which sizes key segments).
#define MASKATTN_CALL_FIELDS(X)                                                               \
  X(q) X(k) X(v) X(out) X(qB) X(qH) X(qL) X(qD) X(kB) X(kH) X(kL) X(kD) X(vB) X(vH) X(vL)      \
  X(vD) X(layout) X(qSize) X(kSize) X(vSize) X(outSize) X(hasScale) X(scale) X(causal)         \
  X(align) X(keyLengths) X(queryLengths) X(allowed) X(allowedB) X(allowedH) X(allowedLq)        \
  X(allowedLk) X(bias) X(biasB) X(biasH) X(biasLq) X(biasLk) X(windowLeft) X(windowRight)       \
  X(prefix) X(querySegments) X(keySegments) X(alibiSlopes) X(softcap) X(fullyMasked)            \
  X(weights) X(weightsSize) X(lse) X(lseSize) X(stats) X(half) X(counts) X(allowedSize) X(biasSize)    \
  X(keyLengthsSize) X(queryLengthsSize) X(querySegmentsSize) X(keySegmentsSize) X(alibiSlopesSize)  \
  X(countsSize) X(threads) X(sinks) X(sinksSize) X(tree) X(treeSize) X(hasRope) X(ropeTheta) X(ropeDims)  \
  X(ropeLayout) X(ropeOffset) X(ropeScaling) X(ropeScalingSize)

struct CallArgs {
#define MASKATTN_FIELD(name) double name;
  MASKATTN_CALL_FIELDS(MASKATTN_FIELD)
#undef MASKATTN_FIELD
};

std::string call_args_layout() {
  std::string names;
#define MASKATTN_NAME(name) names += (names.empty() ? "" : ",") + std::string(#name);
  MASKATTN_CALL_FIELDS(MASKATTN_NAME)
#undef MASKATTN_NAME
  return names;
}

enum Status { kOk = 0, kRangeError = 1, kTypeError = 2, kOutOfMemory = 3, kInternal = 4 };
std::string g_error_message, g_error_argument;

template <class T>
T* at(double address) { return reinterpret_cast<T*>(uintptr_t(address)); }
// A dimension, size or count: JS passes safe integers; anything else (NaN, beyond 2^62) becomes a
// value the library rejects by name, never an out-of-range conversion (undefined behaviour, a trap
// in wasm).
int64_t whole(double x) {
  constexpr double kLimit = 4611686018427387904.0;  // 2^62
  if (x >= -kLimit && x <= kLimit) return int64_t(x);
  return x > 0 ? int64_t(1) << 62 : -(int64_t(1) << 62);
}
// A span's element count (a size_t): negative or absurd counts cannot come from JS; 0 if they do.
size_t elements(double x) {
  const int64_t n = whole(x);
  return n > 0 ? size_t(n) : 0;
}

CallArgs read_args(uint32_t address) {
  CallArgs a;
  std::memcpy(&a, reinterpret_cast<const void*>(uintptr_t(address)), sizeof a);
  return a;
}

maskattn::Layout layout_of(const CallArgs& a) {
  return a.layout == 1 ? maskattn::Layout::blhd : maskattn::Layout::bhld;
}

// RoPE scaling from its wire record (js/plan.js scalingRecord): n doubles, [type, factor,
// original_max_positions, low_freq_factor, high_freq_factor, beta_fast, beta_slow, mscale,
// mscale_all_dim, attention_factor (NaN = not given), then the lengths of short_factor,
// long_factor and freq_factors and their values]. n = 0: no scaling. A record whose lengths do not
// add up gets a type outside the enum, which the library names (rope.scaling.type).
constexpr size_t kScalingHead = 13;
maskattn::RopeScaling scaling_of(const double* p, size_t n) {
  using maskattn::RopeScalingType;
  maskattn::RopeScaling s;
  if (n == 0) return s;
  const auto lists = [&](size_t i) { return n >= kScalingHead ? size_t(std::max(0.0, std::min(p[10 + i], 1e9))) : 0; };
  if (n < kScalingHead || kScalingHead + lists(0) + lists(1) + lists(2) != n || !(p[0] >= 1 && p[0] <= 6)) {
    s.type = static_cast<RopeScalingType>(-1);
    return s;
  }
  s.type = static_cast<RopeScalingType>(int(p[0]));
  s.factor = p[1];
  s.original_max_positions = whole(p[2]);
  s.low_freq_factor = p[3];
  s.high_freq_factor = p[4];
  s.beta_fast = p[5];
  s.beta_slow = p[6];
  if (p[7] == p[7]) s.mscale = p[7];
  if (p[8] == p[8]) s.mscale_all_dim = p[8];
  if (p[9] == p[9]) s.attention_factor = p[9];
  const double* v = p + kScalingHead;
  s.short_factor.assign(v, v + lists(0));
  s.long_factor.assign(v + lists(0), v + lists(0) + lists(1));
  s.freq_factors.assign(v + lists(0) + lists(1), v + n - kScalingHead);
  return s;
}

// RoPE from its wire fields: layout 0 = halves, 1 = interleaved (another code reaches the library,
// which names rope.layout); theta as given (the library checks it), dims and offset as integers.
maskattn::Rope rope_of(double theta, double dims, double layout, double offset, const double* scaling = nullptr,
                       size_t scaling_size = 0) {
  maskattn::Rope r;
  r.theta = theta;
  r.dims = whole(dims);
  r.layout = layout == 0 ? maskattn::RopeLayout::halves
             : layout == 1 ? maskattn::RopeLayout::interleaved : static_cast<maskattn::RopeLayout>(-1);
  r.offset = whole(offset);
  if (scaling) r.scaling = scaling_of(scaling, scaling_size);
  return r;
}

// The per-call options (mask rules, policy, stats), shared by attention() and kvAttend().
maskattn::Options options_of(const CallArgs& a, maskattn::Stats* stats) {
  using namespace maskattn;
  Options o;
  if (a.hasScale != 0) o.scale = float(a.scale);
  o.causal = a.causal != 0;
  o.align = a.align == 1 ? Align::top_left : Align::bottom_right;
  if (a.keyLengths) o.key_lengths = Span<int32_t>(at<const int32_t>(a.keyLengths), elements(a.keyLengthsSize));
  if (a.queryLengths) o.query_lengths = Span<int32_t>(at<const int32_t>(a.queryLengths), elements(a.queryLengthsSize));
  if (a.allowed)
    o.allowed = make_mask(at<const uint8_t>(a.allowed), whole(a.allowedB), whole(a.allowedH), whole(a.allowedLq),
                          whole(a.allowedLk), whole(a.allowedSize));
  if (a.bias)
    o.bias = make_mask(at<const float>(a.bias), whole(a.biasB), whole(a.biasH), whole(a.biasLq), whole(a.biasLk),
                       whole(a.biasSize));
  o.window = Window{whole(a.windowLeft), whole(a.windowRight)};
  o.prefix = whole(a.prefix);
  if (a.querySegments) o.query_segments = Span<int32_t>(at<const int32_t>(a.querySegments), elements(a.querySegmentsSize));
  if (a.keySegments) o.key_segments = Span<int32_t>(at<const int32_t>(a.keySegments), elements(a.keySegmentsSize));
  if (a.alibiSlopes) o.alibi_slopes = Span<float>(at<const float>(a.alibiSlopes), elements(a.alibiSlopesSize));
  if (a.sinks) o.sinks = Span<float>(at<const float>(a.sinks), elements(a.sinksSize));
  if (a.tree) o.tree = Span<int32_t>(at<const int32_t>(a.tree), elements(a.treeSize));
  if (a.hasRope != 0)
    o.rope = rope_of(a.ropeTheta, a.ropeDims, a.ropeLayout, a.ropeOffset, at<const double>(a.ropeScaling),
                     a.ropeScaling ? elements(a.ropeScalingSize) : 0);
  // A softcap that is not 0 but rounds to 0 in float would silently turn the cap off: passed on as
  // the smallest subnormal, which the library rejects (JS checks first and names the value).
  o.softcap = float(a.softcap);
  if (a.softcap > 0 && o.softcap == 0) o.softcap = std::numeric_limits<float>::denorm_min();
  o.fully_masked = a.fullyMasked == 1 ? FullyMasked::nan : a.fullyMasked == 2 ? FullyMasked::uniform : FullyMasked::zero;
  if (a.stats) o.stats = stats;
  // Most threads to use (0 = absent: 1). JS never asks for more than the module's worker pool
  // holds, and the library's cost model may use fewer (Stats::threads_used).
  if (a.threads >= 1) o.threads = int(std::min(a.threads, double(maskattn::kMaxThreads)));
  return o;
}

maskattn::ExtraOutputs extra_of(const CallArgs& a) {
  maskattn::ExtraOutputs extra;
  extra.weights = at<float>(a.weights);
  extra.weights_size = a.weights ? whole(a.weightsSize) : -1;
  extra.lse = at<float>(a.lse);
  extra.lse_size = a.lse ? whole(a.lseSize) : -1;
  return extra;
}

void write_stats(const CallArgs& a, const maskattn::Stats& stats) {
  if (!a.stats) return;
  double* s = at<double>(a.stats);
  s[0] = double(stats.tiles_skipped);
  s[1] = double(stats.tiles_full);
  s[2] = double(stats.tiles_mixed);
  s[3] = double(stats.threads_used);
}

// Runs body(), turning every exception into a status code and the error's argument and message
// (read by JS with lastErrorArgument/lastErrorMessage). `oom` says what could not be allocated.
template <class Body>
int guarded(const char* oom, Body&& body) {
  try {
    body();
    return kOk;
  } catch (const maskattn::ArgumentError& e) {
    g_error_argument = e.argument();
    g_error_message = e.what();
    return e.is_type_error() ? kTypeError : kRangeError;
  } catch (const std::bad_alloc&) {
    g_error_argument = "memory";
    g_error_message = std::string("out of memory: ") + oom;
    return kOutOfMemory;
  } catch (const std::exception& e) {
    g_error_argument = "";
    g_error_message = e.what();
    return kInternal;
  }
}

// `args` is the address of a CallArgs block.
int attention(uint32_t args) {
  const CallArgs a = read_args(args);
  using namespace maskattn;
  return guarded("the WebAssembly heap cannot hold this problem's scratch space", [&] {
    const Layout layout = layout_of(a);
    const ConstTensor q = make_tensor(at<const float>(a.q), layout, whole(a.qB), whole(a.qH), whole(a.qL), whole(a.qD), whole(a.qSize));
    const ConstTensor k = make_tensor(at<const float>(a.k), layout, whole(a.kB), whole(a.kH), whole(a.kL), whole(a.kD), whole(a.kSize));
    const ConstTensor v = make_tensor(at<const float>(a.v), layout, whole(a.vB), whole(a.vH), whole(a.vL), whole(a.vD), whole(a.vSize));
    // The output follows q (batch, heads, queries) and v (value dim); the library checks it too.
    const MutableTensor out = make_tensor(at<float>(a.out), layout, whole(a.qB), whole(a.qH), whole(a.qL), whole(a.vD), whole(a.outSize));
    Stats stats;
    maskattn::attention(q, k, v, out, options_of(a, &stats), extra_of(a));
    write_stats(a, stats);
  });
}

// ------------------------------------------------------------------------------------ KV cache

// Caches by handle. Ownership: each KVCache (and its K/V storage) belongs to this table from
// kvCreate until kvDestroy; JS holds only the handle. Handles are never reused, so a stale one is
// an error here rather than another cache.
std::unordered_map<uint32_t, std::unique_ptr<maskattn::KVCache>> g_caches;
uint32_t g_next_handle = 1;

maskattn::KVCache& cache_of(uint32_t handle) {
  const auto it = g_caches.find(handle);
  if (it == g_caches.end()) throw maskattn::ArgumentError("cache", "used after dispose()");
  return *it->second;
}

// A valid Rope's attention factor for head dim D (a cache's config reports it resolved); NaN if the
// Rope is not valid (the cache that has it was refused first, naming the field).
double rope_attention_factor(double theta, double dims, double layout, double offset, emscripten::val rope_scaling,
                             double head_dim) {
  const std::vector<double> scaling = emscripten::vecFromJSArray<double>(rope_scaling);
  try {
    return maskattn::rope_frequencies(rope_of(theta, dims, layout, offset, scaling.data(), scaling.size()), whole(head_dim), 0)
        .attention_factor;
  } catch (...) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

// The cache dtypes (maskattn/kv_types.inc), the one list JavaScript reads (js/plan.js): in code
// order, each { name, code, bits, quantized, rawBits } (rawBits: append() also takes the stored
// bits as uint16). The C++ enumerators' earlier spellings (f16) are not JavaScript names.
emscripten::val kv_types() {
  using namespace maskattn;
  emscripten::val list = emscripten::val::array();
  for (KVType t : kKVTypes) {
    const KVTypeInfo info = kv_type_info(t);
    emscripten::val row = emscripten::val::object();
    row.set("name", std::string(info.name));
    row.set("code", int(t));
    row.set("bits", info.bits);
    row.set("quantized", info.quantized);
    row.set("rawBits", info.raw_bits);
    list.call<void>("push", row);
  }
  return list;
}

// A cache's configuration crosses as one object of named numbers, like the call's block: the
// field list below is its one definition, published by cacheConfigLayout() (a test checks that JS,
// js/plan.js CACHE_CONFIG, writes exactly these). dtypes: codes from kvTypes(); keyDtype and
// valueDtype -1 = dtype; keyRotation 0 = automatic, 1 = none, 2 = hadamard; window 0 = none;
// sinkTokens 0 = none; pageSize 0 = one contiguous block; hasRope 0 = no RoPE (else rope_of's
// fields; ropeScaling: the scaling's record as an array of numbers, empty = none). JS passes safe
// integers; a code outside the enums reaches the library, which names the field.
#define MASKATTN_CACHE_FIELDS(X)                                                                \
  X(batch) X(kvHeads) X(capacity) X(headDim) X(valueDim) X(dtype) X(window) X(keyDtype) X(valueDtype) \
  X(keyRotation) X(sinkTokens) X(pageSize) X(hasRope) X(ropeTheta) X(ropeDims) X(ropeLayout) X(ropeOffset)

std::string cache_config_layout() {
  std::string names;
#define MASKATTN_NAME(name) names += std::string(#name) + ",";
  MASKATTN_CACHE_FIELDS(MASKATTN_NAME)
#undef MASKATTN_NAME
  return names + "ropeScaling";
}

// Returns the new cache's handle (> 0), or minus the status code when the configuration is bad or
// its memory cannot be had.
double kv_create(emscripten::val fields) {
  using namespace maskattn;
  struct {
#define MASKATTN_FIELD(name) double name;
    MASKATTN_CACHE_FIELDS(MASKATTN_FIELD)
#undef MASKATTN_FIELD
  } f;
#define MASKATTN_READ(name) f.name = fields[#name].as<double>();
  MASKATTN_CACHE_FIELDS(MASKATTN_READ)
#undef MASKATTN_READ
  uint32_t handle = 0;
  const int status = guarded("the WebAssembly heap cannot hold this cache's keys and values", [&] {
    KVCacheConfig config;
    config.batch = whole(f.batch);
    config.kv_heads = whole(f.kvHeads);
    config.capacity = whole(f.capacity);
    config.head_dim = whole(f.headDim);
    config.value_dim = whole(f.valueDim);
    constexpr double kTypes = double(std::size(kKVTypes));
    auto type = [](double code) { return code >= 0 && code < kTypes ? static_cast<KVType>(int(code)) : static_cast<KVType>(-1); };
    config.dtype = type(f.dtype);
    if (f.keyDtype != -1) config.key_dtype = type(f.keyDtype);
    if (f.valueDtype != -1) config.value_dtype = type(f.valueDtype);
    config.key_rotation = f.keyRotation >= 0 && f.keyRotation <= 2 ? static_cast<KeyRotation>(int(f.keyRotation))
                                                                   : static_cast<KeyRotation>(-1);
    config.window = whole(f.window);
    config.sink_tokens = whole(f.sinkTokens);
    config.page_size = whole(f.pageSize);
    if (f.hasRope != 0) {
      const std::vector<double> scaling = emscripten::vecFromJSArray<double>(fields["ropeScaling"]);
      config.rope = rope_of(f.ropeTheta, f.ropeDims, f.ropeLayout, f.ropeOffset, scaling.data(), scaling.size());
    }
    auto cache = std::make_unique<KVCache>(config);
    if (g_next_handle == 0) g_next_handle = 1;  // after 2^32 caches: 0 stays "no cache"
    handle = g_next_handle++;
    g_caches.emplace(handle, std::move(cache));
  });
  return status == kOk ? double(handle) : -double(status);
}

void kv_destroy(uint32_t handle) { g_caches.erase(handle); }

// k and v at their addresses in the args block: floats, or IEEE halves when `half` is set.
int kv_append(uint32_t handle, uint32_t args) {
  const CallArgs a = read_args(args);
  using namespace maskattn;
  return guarded("the WebAssembly heap cannot hold this append's scratch space", [&] {
    KVCache& cache = cache_of(handle);
    const Layout layout = layout_of(a);
    Span<int32_t> counts;
    if (a.counts) counts = Span<int32_t>(at<const int32_t>(a.counts), elements(a.countsSize));
    if (a.half != 0) {
      cache.append(make_tensor(at<const uint16_t>(a.k), layout, whole(a.kB), whole(a.kH), whole(a.kL), whole(a.kD), whole(a.kSize)),
                   make_tensor(at<const uint16_t>(a.v), layout, whole(a.vB), whole(a.vH), whole(a.vL), whole(a.vD), whole(a.vSize)),
                   counts);
    } else {
      cache.append(make_tensor(at<const float>(a.k), layout, whole(a.kB), whole(a.kH), whole(a.kL), whole(a.kD), whole(a.kSize)),
                   make_tensor(at<const float>(a.v), layout, whole(a.vB), whole(a.vH), whole(a.vL), whole(a.vD), whole(a.vSize)),
                   counts);
    }
  });
}

// q, out, weights, lse and the options as attention() takes them; the keys are the cache's.
int kv_attend(uint32_t handle, uint32_t args) {
  const CallArgs a = read_args(args);
  using namespace maskattn;
  return guarded("the WebAssembly heap cannot hold this problem's scratch space", [&] {
    const KVCache& cache = cache_of(handle);
    const Layout layout = layout_of(a);
    const ConstTensor q = make_tensor(at<const float>(a.q), layout, whole(a.qB), whole(a.qH), whole(a.qL), whole(a.qD), whole(a.qSize));
    const MutableTensor out = make_tensor(at<float>(a.out), layout, whole(a.qB), whole(a.qH), whole(a.qL), whole(a.vD), whole(a.outSize));
    Stats stats;
    cache.attend(q, out, options_of(a, &stats), extra_of(a));
    write_stats(a, stats);
  });
}

int kv_truncate(uint32_t handle, uint32_t lengths, uint32_t count) {
  using namespace maskattn;
  return guarded("the WebAssembly heap is full", [&] {
    cache_of(handle).truncate(Span<int32_t>(reinterpret_cast<const int32_t*>(uintptr_t(lengths)), size_t(count)));
  });
}

int kv_reset(uint32_t handle) {
  return guarded("the WebAssembly heap is full", [&] { cache_of(handle).reset(); });
}

int kv_fork(uint32_t handle, double src, double dst) {
  return guarded("the WebAssembly heap cannot hold a copy of this sequence",
                 [&] { cache_of(handle).fork(whole(src), whole(dst)); });
}

// tree: tree_size parent indices, path: path_size node indices (int32 arrays in wasm memory).
int kv_keep(uint32_t handle, double sequence, uint32_t tree, uint32_t tree_size, uint32_t path, uint32_t path_size) {
  using namespace maskattn;
  return guarded("the WebAssembly heap cannot hold a copy of a shared page", [&] {
    cache_of(handle).keep(whole(sequence), Span<int32_t>(at<const int32_t>(tree), size_t(tree_size)),
                          Span<int32_t>(at<const int32_t>(path), size_t(path_size)));
  });
}

// The address of the cache's lengths (config().batch int32 values), valid until the next call
// into the cache; 0 for a stale handle. JS copies them out at once.
uint32_t kv_lengths(uint32_t handle) {
  const auto it = g_caches.find(handle);
  return it == g_caches.end() ? 0 : uint32_t(uintptr_t(it->second->lengths().data()));
}

// read(b): the dequantized contents, kept here until the next read or kvReadRelease(); JS copies
// them out of the heap at once (kvReadResult gives their addresses).
maskattn::KVCache::Contents g_read;

int kv_read(uint32_t handle, double b) {
  return guarded("the WebAssembly heap cannot hold this sequence's contents as float32", [&] {
    g_read = {};
    g_read = cache_of(handle).read(int64_t(b));
  });
}

emscripten::val kv_read_result() {
  auto info = emscripten::val::object();
  info.set("start", double(g_read.start));
  info.set("sinks", double(g_read.sinks));
  info.set("length", double(g_read.length));
  info.set("key", double(uintptr_t(g_read.key.data())));
  info.set("value", double(uintptr_t(g_read.value.data())));
  return info;
}

void kv_read_release() { g_read = {}; }

// mergeAttention: `parts` is `count` pairs of addresses (output [B, H, L, Dv], lse [B, H, L], both
// contiguous); out [B, H, L, Dv] and lse [B, H, L] receive the merged result.
int merge_attention(uint32_t parts, uint32_t count, double B, double H, double L, double Dv, uint32_t out,
                    uint32_t out_lse) {
  using namespace maskattn;
  return guarded("the WebAssembly heap is full", [&] {
    const uint32_t* table = at<const uint32_t>(parts);
    std::vector<AttentionPart> views(count);
    for (uint32_t p = 0; p < count; ++p)
      views[p] = {bhld(at<const float>(table[2 * p]), whole(B), whole(H), whole(L), whole(Dv)), at<const float>(table[2 * p + 1])};
    merge_attention(Span<AttentionPart>(views), bhld(at<float>(out), whole(B), whole(H), whole(L), whole(Dv)),
                    at<float>(out_lse));
  });
}

// The page table of sequence b (an array of page numbers, -1 = none), or a status < 0 as a number
// when b is out of range (JS then reads the error).
emscripten::val kv_pages(uint32_t handle, double b) {
  std::vector<int32_t> table;
  const int status = guarded("the WebAssembly heap is full", [&] { table = cache_of(handle).pages(whole(b)); });
  if (status != kOk) return emscripten::val(-double(status));
  auto out = emscripten::val::array();
  for (size_t i = 0; i < table.size(); ++i) out.set(i, table[i]);
  return out;
}

double kv_byte_length(uint32_t handle) {
  const auto it = g_caches.find(handle);
  return it == g_caches.end() ? -1 : double(it->second->byte_length());
}

// The library's limits, for JavaScript's own checks (one source: maskattn::max_buffer_bytes(),
// maskattn::max_sequence_length(), maskattn::max_ring_length()).
emscripten::val limits() {
  auto info = emscripten::val::object();
  info.set("maxBytes", double(maskattn::max_buffer_bytes()));
  info.set("maxSequenceLength", double(maskattn::max_sequence_length()));
  info.set("maxRingLength", double(maskattn::max_ring_length()));
  return info;
}

// Bytes of the wasm heap in use (allocated by malloc and not freed): the endurance and leak tests
// measure it before and after many calls.
double heap_in_use() { return double(uint32_t(mallinfo().uordblks)); }

extern "C" double maskattn_read_probe(double megabytes, double threads, double reps);  // read_probe.cpp

std::string last_error_message() { return g_error_message; }
std::string last_error_argument() { return g_error_argument; }

#if defined(MASKATTN_RELAXED_SIMD_BUILD)
// Defined by the relaxed SIMD128 kernel (src/kernel/int_dot/simd128_relaxed.hpp): which integer
// dot product its q8/q4 Q·Kᵀ uses, as probed at module start, and a way to choose another.
extern "C" const char* maskattn_relaxed_quant_dot();
extern "C" bool maskattn_set_relaxed_quant_dot(int mode);
extern "C" const char* maskattn_relaxed_dot_lowering();
#endif

// Tests and benchmarks: how the engine lowers i32x4.relaxed_dot_i8x16_i7x16_add_s, which decides
// the relaxed build's first choice of quantDot ('x86-pairs-saturated', 'x86-vnni', 'signed-bytes',
// 'unknown'); 'none' in builds without relaxed SIMD.
std::string relaxed_dot_lowering() {
#if defined(MASKATTN_RELAXED_SIMD_BUILD)
  return maskattn_relaxed_dot_lowering();
#else
  return "none";
#endif
}

// Tests and benchmarks: 'i16' (exact SIMD128 path), 'relaxed-i8' or 'relaxed-i8-i16x8'; false where
// this build or engine cannot run it.
bool set_quant_dot(const std::string& name) {
#if defined(MASKATTN_RELAXED_SIMD_BUILD)
  const int mode = name == "i16" ? 0 : name == "relaxed-i8-i16x8" ? 1 : name == "relaxed-i8" ? 2 : -1;
  return mode >= 0 && maskattn_set_relaxed_quant_dot(mode);
#else
  return name == (maskattn::best_target() == maskattn::Target::simd128 ? "i16" : "scalar");
#endif
}

emscripten::val backend() {
  auto info = emscripten::val::object();
  const maskattn::Target t = maskattn::best_target();
  info.set("simd", t == maskattn::Target::simd128);
  info.set("arch", std::string(maskattn::target_name(t)));
  info.set("lanes", maskattn::target_lanes(t));
  // Whether this module was built with pthreads (JS reports its pool's size as `threads`) and
  // whether its SIMD128 kernel uses relaxed SIMD (f32x4.relaxed_madd).
#if defined(__EMSCRIPTEN_PTHREADS__)
  info.set("pthreads", true);
#else
  info.set("pthreads", false);
#endif
#if defined(MASKATTN_RELAXED_SIMD_BUILD)
  info.set("relaxed", true);
#else
  info.set("relaxed", false);
#endif
  // The integer dot product of Q·Kᵀ over q8/q4 caches (the relaxed build's is probed at start).
#if defined(MASKATTN_RELAXED_SIMD_BUILD)
  info.set("quantDot", std::string(t == maskattn::Target::simd128 ? maskattn_relaxed_quant_dot() : "scalar"));
#else
  info.set("quantDot", std::string(t == maskattn::Target::simd128 ? "i16" : "scalar"));
#endif
  info.set("threads", 1);
  info.set("version", std::string(maskattn::version()));
  return info;
}

}  // namespace

EMSCRIPTEN_BINDINGS(maskattn) {
  using namespace emscripten;
  // Same names as the JS API functions they serve (tfjs-backend-wasm style).
  function("attention", &attention);
  function("lastErrorMessage", &last_error_message);
  function("lastErrorArgument", &last_error_argument);
  function("backend", &backend);
  function("setQuantDot", &set_quant_dot);
  function("relaxedDotLowering", &relaxed_dot_lowering);
  function("callArgsLayout", &call_args_layout);
  function("limits", &limits);
  function("heapInUse", &heap_in_use);
  function("readProbe", &maskattn_read_probe);
  function("kvCreate", &kv_create);
  function("kvTypes", &kv_types);
  function("cacheConfigLayout", &cache_config_layout);
  function("ropeAttentionFactor", &rope_attention_factor);
  function("kvDestroy", &kv_destroy);
  function("kvAppend", &kv_append);
  function("kvAttend", &kv_attend);
  function("kvTruncate", &kv_truncate);
  function("kvReset", &kv_reset);
  function("kvFork", &kv_fork);
  function("kvKeep", &kv_keep);
  function("kvPages", &kv_pages);
  function("kvLengths", &kv_lengths);
  function("kvByteLength", &kv_byte_length);
  function("mergeAttention", &merge_attention);
  function("kvRead", &kv_read);
  function("kvReadResult", &kv_read_result);
  function("kvReadRelease", &kv_read_release);
}
