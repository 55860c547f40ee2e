// Embind layer: thin on purpose. JavaScript (js/index.js) places tensors in wasm memory and passes
// their addresses and shapes; the library's own validation checks everything, and every C++
// exception is caught here and turned into a status code plus message, so a bad argument or an
// out-of-memory never aborts the module and it stays usable.
#include <emscripten/bind.h>

#include <cstdint>
#include <new>
#include <string>

#include <maskattn/maskattn.hpp>

namespace {

// One call's arguments. Addresses are byte offsets into wasm memory (0 = absent); each tensor's
// own logical dims [B, H, L, D] are passed so that the library's validation sees any mismatch;
// `layout` 0 = bhld, 1 = blhd. Mask shapes are already 4-D (JS pads them).
struct CallArgs {
  uint32_t q = 0, k = 0, v = 0, out = 0;
  int32_t qB = 0, qH = 0, qL = 0, qD = 0, kB = 0, kH = 0, kL = 0, kD = 0;
  int32_t vB = 0, vH = 0, vL = 0, vD = 0, layout = 0;
  double qSize = -1, kSize = -1, vSize = -1, outSize = -1;
  bool hasScale = false;
  double scale = 0;
  bool causal = false;
  int32_t align = 0;  // 0 bottom-right, 1 top-left
  uint32_t keyLengths = 0, queryLengths = 0;
  uint32_t allowed = 0;
  int32_t allowedB = 1, allowedH = 1, allowedLq = 1, allowedLk = 1;
  uint32_t bias = 0;
  int32_t biasB = 1, biasH = 1, biasLq = 1, biasLk = 1;
  double windowLeft = -1, windowRight = -1, prefix = 0;
  uint32_t querySegments = 0, keySegments = 0, alibiSlopes = 0;
  double softcap = 0;
  int32_t fullyMasked = 0;  // 0 zero, 1 nan, 2 uniform
  uint32_t weights = 0, lse = 0;
  uint32_t stats = 0;  // 3 x float64: skipped, full, mixed
};

enum Status { kOk = 0, kRangeError = 1, kTypeError = 2, kOutOfMemory = 3, kInternal = 4 };
std::string g_error_message, g_error_argument;

template <class T>
T* at(uint32_t address) { return reinterpret_cast<T*>(uintptr_t(address)); }

int attention(const CallArgs& a) {
  using namespace maskattn;
  try {
    const Layout layout = a.layout == 1 ? Layout::blhd : Layout::bhld;
    const ConstTensor q = make_tensor(at<const float>(a.q), layout, a.qB, a.qH, a.qL, a.qD, int64_t(a.qSize));
    const ConstTensor k = make_tensor(at<const float>(a.k), layout, a.kB, a.kH, a.kL, a.kD, int64_t(a.kSize));
    const ConstTensor v = make_tensor(at<const float>(a.v), layout, a.vB, a.vH, a.vL, a.vD, int64_t(a.vSize));
    // The output follows q (batch, heads, queries) and v (value dim); the library checks it too.
    const MutableTensor out = make_tensor(at<float>(a.out), layout, a.qB, a.qH, a.qL, a.vD, int64_t(a.outSize));
    Options o;
    if (a.hasScale) o.scale = float(a.scale);
    o.causal = a.causal;
    o.align = a.align == 1 ? Align::top_left : Align::bottom_right;
    if (a.keyLengths) o.key_lengths = Span<int32_t>(at<const int32_t>(a.keyLengths), size_t(a.qB));
    if (a.queryLengths) o.query_lengths = Span<int32_t>(at<const int32_t>(a.queryLengths), size_t(a.qB));
    if (a.allowed) o.allowed = make_mask(at<const uint8_t>(a.allowed), a.allowedB, a.allowedH, a.allowedLq, a.allowedLk);
    if (a.bias) o.bias = make_mask(at<const float>(a.bias), a.biasB, a.biasH, a.biasLq, a.biasLk);
    o.window = Window{int64_t(a.windowLeft), int64_t(a.windowRight)};
    o.prefix = int64_t(a.prefix);
    if (a.querySegments) o.query_segments = Span<int32_t>(at<const int32_t>(a.querySegments), size_t(a.qB) * size_t(a.qL));
    if (a.keySegments) o.key_segments = Span<int32_t>(at<const int32_t>(a.keySegments), size_t(a.qB) * size_t(a.kL));
    if (a.alibiSlopes) o.alibi_slopes = Span<float>(at<const float>(a.alibiSlopes), size_t(a.qH));
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
  value_object<CallArgs>("CallArgs")
      .field("q", &CallArgs::q).field("k", &CallArgs::k).field("v", &CallArgs::v).field("out", &CallArgs::out)
      .field("qB", &CallArgs::qB).field("qH", &CallArgs::qH).field("qL", &CallArgs::qL).field("qD", &CallArgs::qD)
      .field("kB", &CallArgs::kB).field("kH", &CallArgs::kH).field("kL", &CallArgs::kL).field("kD", &CallArgs::kD)
      .field("vB", &CallArgs::vB).field("vH", &CallArgs::vH).field("vL", &CallArgs::vL).field("vD", &CallArgs::vD)
      .field("layout", &CallArgs::layout)
      .field("qSize", &CallArgs::qSize).field("kSize", &CallArgs::kSize)
      .field("vSize", &CallArgs::vSize).field("outSize", &CallArgs::outSize)
      .field("hasScale", &CallArgs::hasScale).field("scale", &CallArgs::scale)
      .field("causal", &CallArgs::causal).field("align", &CallArgs::align)
      .field("keyLengths", &CallArgs::keyLengths).field("queryLengths", &CallArgs::queryLengths)
      .field("allowed", &CallArgs::allowed)
      .field("allowedB", &CallArgs::allowedB).field("allowedH", &CallArgs::allowedH)
      .field("allowedLq", &CallArgs::allowedLq).field("allowedLk", &CallArgs::allowedLk)
      .field("bias", &CallArgs::bias)
      .field("biasB", &CallArgs::biasB).field("biasH", &CallArgs::biasH)
      .field("biasLq", &CallArgs::biasLq).field("biasLk", &CallArgs::biasLk)
      .field("windowLeft", &CallArgs::windowLeft).field("windowRight", &CallArgs::windowRight)
      .field("prefix", &CallArgs::prefix)
      .field("querySegments", &CallArgs::querySegments).field("keySegments", &CallArgs::keySegments)
      .field("alibiSlopes", &CallArgs::alibiSlopes).field("softcap", &CallArgs::softcap)
      .field("fullyMasked", &CallArgs::fullyMasked)
      .field("weights", &CallArgs::weights).field("lse", &CallArgs::lse).field("stats", &CallArgs::stats);
  // Same names as the JS API functions they serve (tfjs-backend-wasm style).
  function("attention", &attention);
  function("lastErrorMessage", &last_error_message);
  function("lastErrorArgument", &last_error_argument);
  function("backend", &backend);
}
