// Embind layer: thin on purpose. JavaScript (js/index.js) places tensors in wasm memory and passes
// their addresses and shapes; the library's own validation checks everything, and every C++
// exception is caught here and turned into a status code plus message, so a bad argument or an
// out-of-memory never aborts the module and it stays usable.
#include <emscripten/bind.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include <maskattn/maskattn.hpp>

namespace {

// One call's arguments, passed as a flat float64 block in wasm memory that JavaScript fills by
// name: the field list below is the single definition of the layout, published to JS once by
// callArgsLayout(). (Embind value_object conversion cost ~20 us per call, most of a small call.)
// Addresses are byte offsets into wasm memory (0 = absent); each tensor's own logical dims
// [B, H, L, D] are passed so that the library's validation sees any mismatch; layout 0 = bhld,
// 1 = blhd. Mask shapes are already 4-D (JS pads them). Sizes are element counts.
#define MASKATTN_CALL_FIELDS(X)                                                               \
  X(q) X(k) X(v) X(out) X(qB) X(qH) X(qL) X(qD) X(kB) X(kH) X(kL) X(kD) X(vB) X(vH) X(vL)      \
  X(vD) X(layout) X(qSize) X(kSize) X(vSize) X(outSize) X(hasScale) X(scale) X(causal)         \
  X(align) X(keyLengths) X(queryLengths) X(allowed) X(allowedB) X(allowedH) X(allowedLq)        \
  X(allowedLk) X(bias) X(biasB) X(biasH) X(biasLq) X(biasLk) X(windowLeft) X(windowRight)       \
  X(prefix) X(querySegments) X(keySegments) X(alibiSlopes) X(softcap) X(fullyMasked)            \
  X(weights) X(lse) X(stats)

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
int32_t i32(double x) { return int32_t(x); }

// `args` is the address of a CallArgs block.
int attention(uint32_t args) {
  CallArgs a;
  std::memcpy(&a, reinterpret_cast<const void*>(uintptr_t(args)), sizeof a);
  using namespace maskattn;
  try {
    const Layout layout = a.layout == 1 ? Layout::blhd : Layout::bhld;
    const ConstTensor q = make_tensor(at<const float>(a.q), layout, i32(a.qB), i32(a.qH), i32(a.qL), i32(a.qD), int64_t(a.qSize));
    const ConstTensor k = make_tensor(at<const float>(a.k), layout, i32(a.kB), i32(a.kH), i32(a.kL), i32(a.kD), int64_t(a.kSize));
    const ConstTensor v = make_tensor(at<const float>(a.v), layout, i32(a.vB), i32(a.vH), i32(a.vL), i32(a.vD), int64_t(a.vSize));
    // The output follows q (batch, heads, queries) and v (value dim); the library checks it too.
    const MutableTensor out = make_tensor(at<float>(a.out), layout, i32(a.qB), i32(a.qH), i32(a.qL), i32(a.vD), int64_t(a.outSize));
    Options o;
    if (a.hasScale != 0) o.scale = float(a.scale);
    o.causal = a.causal != 0;
    o.align = a.align == 1 ? Align::top_left : Align::bottom_right;
    if (a.keyLengths) o.key_lengths = Span<int32_t>(at<const int32_t>(a.keyLengths), size_t(i32(a.qB)));
    if (a.queryLengths) o.query_lengths = Span<int32_t>(at<const int32_t>(a.queryLengths), size_t(i32(a.qB)));
    if (a.allowed) o.allowed = make_mask(at<const uint8_t>(a.allowed), i32(a.allowedB), i32(a.allowedH), i32(a.allowedLq), i32(a.allowedLk));
    if (a.bias) o.bias = make_mask(at<const float>(a.bias), i32(a.biasB), i32(a.biasH), i32(a.biasLq), i32(a.biasLk));
    o.window = Window{int64_t(a.windowLeft), int64_t(a.windowRight)};
    o.prefix = int64_t(a.prefix);
    if (a.querySegments) o.query_segments = Span<int32_t>(at<const int32_t>(a.querySegments), size_t(i32(a.qB)) * size_t(i32(a.qL)));
    if (a.keySegments) o.key_segments = Span<int32_t>(at<const int32_t>(a.keySegments), size_t(i32(a.qB)) * size_t(i32(a.kL)));
    if (a.alibiSlopes) o.alibi_slopes = Span<float>(at<const float>(a.alibiSlopes), size_t(i32(a.qH)));
    o.softcap = float(a.softcap);
    o.fully_masked = a.fullyMasked == 1 ? FullyMasked::nan : a.fullyMasked == 2 ? FullyMasked::uniform : FullyMasked::zero;
    Stats stats;
    if (a.stats) o.stats = &stats;
    ExtraOutputs extra;
    extra.weights = at<float>(a.weights);
    extra.lse = at<float>(a.lse);
    maskattn::attention(q, k, v, out, o, extra);
    if (a.stats) {
      double* s = at<double>(a.stats);
      s[0] = double(stats.tiles_skipped);
      s[1] = double(stats.tiles_full);
      s[2] = double(stats.tiles_mixed);
    }
    return kOk;
  } catch (const maskattn::ArgumentError& e) {
    g_error_argument = e.argument();
    g_error_message = e.what();
    return e.is_type_error() ? kTypeError : kRangeError;
  } catch (const std::bad_alloc&) {
    g_error_argument = "memory";
    g_error_message = "out of memory: the WebAssembly heap cannot hold this problem's scratch space";
    return kOutOfMemory;
  } catch (const std::exception& e) {
    g_error_argument = "";
    g_error_message = e.what();
    return kInternal;
  }
}

std::string last_error_message() { return g_error_message; }
std::string last_error_argument() { return g_error_argument; }

emscripten::val backend() {
  auto info = emscripten::val::object();
  const maskattn::Target t = maskattn::best_target();
  info.set("simd", t == maskattn::Target::simd128);
  info.set("arch", std::string(maskattn::target_name(t)));
  info.set("lanes", maskattn::target_lanes(t));
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
  function("callArgsLayout", &call_args_layout);
}
