// Bad input: every public entry point validates before it writes anything (docs/semantics.md,
// "Bad input"). Each rejected row mutates one valid baseline problem in one way and checks that
//   - maskattn::attention (and reference_attention, where the argument exists there) throws
//     maskattn::ArgumentError, not another exception, a crash or a silent success;
//   - argument() names the culprit ("key_lengths" also accepts "key_lengths[1]");
//   - what() carries the expected and the given value where a number is meaningful;
//   - nothing was written: out, weights, lse and stats still hold their sentinels.
// Accepted rows check that valid edge shapes and boundary values are NOT rejected and give the
// reference's answer, and the recovery test checks that the library stays usable after errors.
//
// Portable on purpose (the same file runs natively and under Node/WebAssembly): no threads, files
// or platform code. Rows marked `huge` describe tensors far larger than memory: a library that does
// not reject them would read or write wild memory, so each row is its own test and can be filtered.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "maskattn/reference.hpp"

namespace {

using maskattn::ArgumentError;
using maskattn::ConstTensor;
using maskattn::MutableTensor;
using maskattn::Span;

constexpr float kSentinel = 12345.0f;
// Every buffer has this many elements, far more than any valid view here needs, so a library that
// wrongly accepts a too-large shape writes into the sentinel area instead of past the allocation.
constexpr int64_t kCap = int64_t(1) << 14;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t pow2(int e) { return int64_t(1) << e; }

// ---------------------------------------------------------------------------------------------
// One attention problem: buffers, views and options. Spans and views point into the object, so it
// is neither copied nor moved (built behind a unique_ptr).
// ---------------------------------------------------------------------------------------------
struct Problem {
  // The baseline: every dimension a different number, so "expected 8, given 9" is unambiguous.
  int64_t B = 2, Hq = 6, Hkv = 3, Lq = 5, Lk = 8, D = 4, Dv = 7;

  std::vector<float> qbuf, kbuf, vbuf;  // inputs
  std::vector<float> obuf, wbuf, lbuf;  // outputs, sentinel-filled
  std::vector<uint8_t> allowed_buf;
  std::vector<float> bias_buf;
  std::vector<int32_t> key_lengths, query_lengths, query_segments, key_segments;
  std::vector<float> slopes;

  ConstTensor q, k, v;
  MutableTensor out;
  maskattn::Options opt;
  maskattn::ExtraOutputs extra;
  maskattn::Stats stats{777, 777, 777};

  Problem() : qbuf(kCap), kbuf(kCap), vbuf(kCap), obuf(kCap, kSentinel), wbuf(kCap, kSentinel),
              lbuf(kCap, kSentinel), allowed_buf(kCap, 1), bias_buf(kCap, 0.0f) {
    uint32_t state = 12345u;  // fixed seed: failures replay exactly
    auto next = [&state] {
      state = state * 1664525u + 1013904223u;
      return float(state >> 8) / float(1u << 24) * 2.0f - 1.0f;  // [-1, 1)
    };
    for (auto* buf : {&qbuf, &kbuf, &vbuf, &bias_buf})
      for (float& x : *buf) x = next();
    for (size_t i = 0; i < allowed_buf.size(); ++i) allowed_buf[i] = (i % 7 == 3) ? 0 : 1;
    set_dims(B, Hq, Hkv, Lq, Lk, D, Dv);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  // Contiguous bhld views of the given sizes (size = -1, unknown), outputs resized to match.
  void set_dims(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, int64_t dv) {
    B = b; Hq = hq; Hkv = hkv; Lq = lq; Lk = lk; D = d; Dv = dv;
    q = maskattn::bhld<const float>(qbuf.data(), B, Hq, Lq, D);
    k = maskattn::bhld<const float>(kbuf.data(), B, Hkv, Lk, D);
    v = maskattn::bhld<const float>(vbuf.data(), B, Hkv, Lk, Dv);
    out = maskattn::bhld(obuf.data(), B, Hq, Lq, Dv);
    if (extra.weights) extra.weights_size = B * Hq * Lq * Lk;
    if (extra.lse) extra.lse_size = B * Hq * Lq;
  }
  void request_outputs() {
    extra.weights = wbuf.data();
    extra.weights_size = B * Hq * Lq * Lk;
    extra.lse = lbuf.data();
    extra.lse_size = B * Hq * Lq;
  }
  void no_outputs() { extra = maskattn::ExtraOutputs{}; }

  void call() const { maskattn::attention(q, k, v, out, opt, extra); }
  maskattn::ReferenceResult reference() const {
    return maskattn::reference_attention(q, k, v, opt, maskattn::Precision::fp64);
  }
};

// A view with explicit shape and strides (no products computed here: some rows overflow int64).
template <class T>
void set_raw(maskattn::TensorView<T>& t, std::array<int64_t, 4> shape,
             std::array<int64_t, 4> strides) {
  for (int d = 0; d < 4; ++d) { t.shape[d] = shape[d]; t.strides[d] = strides[d]; }
  t.size = -1;
}
template <class T>
void reshape(maskattn::TensorView<T>& t, int64_t b, int64_t h, int64_t l, int64_t d) {
  t = maskattn::bhld(t.data, b, h, l, d);
}

enum class Base {
  plain,  // causal, weights and lse requested, stats attached; no other option
  full,   // every option active at once, all valid
};

std::unique_ptr<Problem> make(Base base) {
  auto p = std::make_unique<Problem>();
  p->opt.causal = true;
  p->opt.stats = &p->stats;
  p->request_outputs();
  if (base == Base::plain) return p;
  maskattn::Options& o = p->opt;
  p->key_lengths = {8, 6};
  p->query_lengths = {5, 4};
  o.key_lengths = p->key_lengths;
  o.query_lengths = p->query_lengths;
  o.allowed = maskattn::make_mask<uint8_t>(p->allowed_buf.data(), 2, 1, 5, 8, 80);  // over heads
  o.bias = maskattn::make_mask<float>(p->bias_buf.data(), 1, 6, 1, 8, 48);  // over B and rows
  p->bias_buf[5] = -kInf;
  o.window = {3, -1};
  o.prefix = 2;
  p->query_segments = {0, 0, 1, 1, 1, /*b=1*/ 0, 0, 0, 0, 0};
  p->key_segments = {0, 0, 0, 1, 1, 1, 1, 1, /*b=1*/ 0, 0, 0, 0, 0, 0, 0, 0};
  o.query_segments = p->query_segments;
  o.key_segments = p->key_segments;
  p->slopes = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f};
  o.alibi_slopes = p->slopes;
  o.softcap = 20.0f;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------
std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool contains_ci(const std::string& hay, const std::string& needle) {
  return lower(hay).find(lower(needle)) != std::string::npos;
}
std::vector<std::string> split_alternatives(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t bar; (bar = s.find('|', start)) != std::string::npos; start = bar + 1)
    out.push_back(s.substr(start, bar - start));
  out.push_back(s.substr(start));
  return out;
}
// argument() names `name` if it is the name itself, an element of it ("key_lengths[1]"), a field of
// it ("window.left") or qualified ("options.scale"). Plain substring matching would let "k" match
// "key_lengths".
bool names(const std::string& argument, const std::string& name) {
  if (argument == name) return true;
  if (argument.size() > name.size() && argument.compare(0, name.size(), name) == 0 &&
      (argument[name.size()] == '[' || argument[name.size()] == '.'))
    return true;
  const std::string suffix = "." + name;
  return argument.size() > suffix.size() &&
         argument.compare(argument.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool names_any(const std::string& argument, const std::string& alternatives) {
  for (const auto& a : split_alternatives(alternatives))
    if (names(argument, a)) return true;
  return false;
}

// Runs `fn`, which must throw ArgumentError naming one of `arg` ("a|b") with every string of
// `says` in what().
void expect_argument_error(const std::function<void()>& fn, const std::string& arg,
                           const std::vector<std::string>& says, const std::string& why) {
  try {
    fn();
  } catch (const ArgumentError& e) {
    EXPECT_TRUE(names_any(e.argument(), arg))
        << "argument() is \"" << e.argument() << "\", expected " << arg << "\n  what(): " << e.what()
        << "\n  why: " << why;
    for (const auto& s : says)
      EXPECT_TRUE(contains_ci(e.what(), s))
          << "what() should mention \"" << s << "\" (expected vs given value)\n  what(): " << e.what()
          << "\n  why: " << why;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a std::exception that is not maskattn::ArgumentError: " << e.what()
                  << "\n  expected ArgumentError naming " << arg << "\n  why: " << why;
    return;
  } catch (...) {
    ADD_FAILURE() << "threw something that is not a std::exception; expected ArgumentError naming "
                  << arg << "\n  why: " << why;
    return;
  }
  ADD_FAILURE() << "no exception; expected ArgumentError naming " << arg << "\n  why: " << why;
}

// Counts buffer elements that no longer hold the sentinel.
int64_t changed(const std::vector<float>& buf, int64_t from = 0) {
  int64_t n = 0;
  for (int64_t i = from; i < int64_t(buf.size()); ++i)
    if (!(buf[size_t(i)] == kSentinel)) ++n;
  return n;
}

void expect_nothing_written(const Problem& p) {
  EXPECT_EQ(changed(p.obuf), 0) << "out was (partly) written before the error";
  EXPECT_EQ(changed(p.wbuf), 0) << "weights was (partly) written before the error";
  EXPECT_EQ(changed(p.lbuf), 0) << "lse was (partly) written before the error";
  EXPECT_EQ(p.stats.tiles_skipped, 777) << "stats changed by a call that failed";
  EXPECT_EQ(p.stats.tiles_full, 777) << "stats changed by a call that failed";
  EXPECT_EQ(p.stats.tiles_mixed, 777) << "stats changed by a call that failed";
}

// fp32 kernel against the fp64 reference. Accuracy has its own tests; here the tolerance only has
// to tell "the right answer" from "a different answer", so it is loose.
constexpr double kTol = 1e-4;
bool close(double ref, float got) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return double(got) == ref;
  return std::isfinite(got) && std::fabs(double(got) - ref) <= kTol * std::max(1.0, std::fabs(ref));
}

// Compares p's outputs (read through out's strides) with `ref`, and checks that nothing outside
// the views was written.
void expect_matches(const Problem& p, const maskattn::ReferenceResult& ref) {
  const int64_t B = p.out.shape[0], Hq = p.out.shape[1], Lq = p.out.shape[2], Dv = p.out.shape[3];
  const int64_t Lk = p.k.shape[2];
  ASSERT_EQ(int64_t(ref.out.size()), B * Hq * Lq * Dv);
  std::vector<char> addressed(size_t(kCap), 0);
  int64_t bad = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t d = 0; d < Dv; ++d) {
          const int64_t off = b * p.out.strides[0] + h * p.out.strides[1] + i * p.out.strides[2] + d;
          ASSERT_TRUE(off >= 0 && off < kCap);
          addressed[size_t(off)] = 1;
          const double r = ref.out[size_t(((b * Hq + h) * Lq + i) * Dv + d)];
          const float g = p.out.data[off];
          if (!close(r, g) && bad++ < 5)
            ADD_FAILURE() << "out[" << b << "," << h << "," << i << "," << d << "] = " << g
                          << ", reference " << r;
        }
  EXPECT_EQ(bad, 0) << "elements of out differing from the reference";
  for (int64_t i = 0; i < kCap; ++i)
    if (!addressed[size_t(i)] && !(p.obuf[size_t(i)] == kSentinel)) {
      ADD_FAILURE() << "out buffer written outside the view at element " << i;
      break;
    }
  const int64_t nw = B * Hq * Lq * Lk, nl = B * Hq * Lq;
  if (p.extra.weights) {
    ASSERT_EQ(int64_t(ref.weights.size()), nw);
    int64_t wbad = 0;
    for (int64_t i = 0; i < nw; ++i)
      if (!close(ref.weights[size_t(i)], p.extra.weights[i]) && wbad++ < 5)
        ADD_FAILURE() << "weights[" << i << "] = " << p.extra.weights[i] << ", reference "
                      << ref.weights[size_t(i)];
    EXPECT_EQ(wbad, 0) << "elements of weights differing from the reference";
    EXPECT_EQ(changed(p.wbuf, nw), 0) << "weights written past B*Hq*Lq*Lk";
  } else {
    EXPECT_EQ(changed(p.wbuf), 0) << "weights written although not requested";
  }
  if (p.extra.lse) {
    ASSERT_EQ(int64_t(ref.lse.size()), nl);
    int64_t lbad = 0;
    for (int64_t i = 0; i < nl; ++i)
      if (!close(ref.lse[size_t(i)], p.extra.lse[i]) && lbad++ < 5)
        ADD_FAILURE() << "lse[" << i << "] = " << p.extra.lse[i] << ", reference "
                      << ref.lse[size_t(i)];
    EXPECT_EQ(lbad, 0) << "elements of lse differing from the reference";
    EXPECT_EQ(changed(p.lbuf, nl), 0) << "lse written past B*Hq*Lq";
  } else {
    EXPECT_EQ(changed(p.lbuf), 0) << "lse written although not requested";
  }
}

// ---------------------------------------------------------------------------------------------
// Rejected inputs
// ---------------------------------------------------------------------------------------------
enum class Ref {
  no,   // not an argument of reference_attention (out, weights, lse, threads, target)
  yes,  // reference_attention must reject it too, naming the same argument
};

struct BadCase {
  std::string name;
  Base base;
  std::function<void(Problem&)> mutate;
  std::string arg;                // argument() must name one of these ("a|b")
  std::vector<std::string> says;  // what() must contain each (case-insensitive)
  Ref ref;
  const char* why;
  bool huge = false;              // describes tensors larger than memory (see file comment)
  std::string ref_arg = {};       // reference's name, when it differs from `arg`
  bool only_32bit = false;        // only a 32-bit address space (wasm32) makes it impossible
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

using P = Problem;
const std::vector<BadCase>& bad_cases() {
  static const std::vector<BadCase> cases = {
      // --- Shapes that disagree. q defines B, Hq, Lq and D; k defines Hkv and Lk; v defines Dv.
      {"k_batch_mismatch", Base::full, [](P& p) { reshape(p.k, 11, 3, 8, 4); }, "k", {"11", "2"},
       Ref::yes, "k has 11 batches, q has 2"},
      {"v_batch_mismatch", Base::full, [](P& p) { reshape(p.v, 11, 3, 8, 7); }, "v", {"11", "2"},
       Ref::yes, "v has 11 batches, q has 2"},
      {"out_batch_mismatch", Base::full, [](P& p) { reshape(p.out, 11, 6, 5, 7); }, "out",
       {"11", "2"}, Ref::no, "out has 11 batches, q has 2"},
      {"k_head_dim_mismatch", Base::full, [](P& p) { reshape(p.k, 2, 3, 8, 11); }, "k", {"11", "4"},
       Ref::yes, "q.k needs the same D: k has 11, q has 4"},
      {"v_heads_mismatch", Base::full, [](P& p) { reshape(p.v, 2, 11, 8, 7); }, "v", {"11", "3"},
       Ref::yes, "v must have k's 3 heads, has 11"},
      {"v_length_mismatch", Base::full, [](P& p) { reshape(p.v, 2, 3, 11, 7); }, "v", {"11", "8"},
       Ref::yes, "v must have k's 8 keys, has 11"},
      {"out_heads_mismatch", Base::full, [](P& p) { reshape(p.out, 2, 11, 5, 7); }, "out",
       {"11", "6"}, Ref::no, "out must have q's 6 heads, has 11"},
      {"out_heads_is_hkv", Base::full, [](P& p) { reshape(p.out, 2, 3, 5, 7); }, "out", {"3", "6"},
       Ref::no, "GQA slip: out sized with Hkv = 3 instead of Hq = 6"},
      {"out_length_mismatch", Base::full, [](P& p) { reshape(p.out, 2, 6, 11, 7); }, "out",
       {"11", "5"}, Ref::no, "out must have q's 5 rows, has 11"},
      {"out_value_dim_mismatch", Base::full, [](P& p) { reshape(p.out, 2, 6, 5, 11); }, "out",
       {"11", "7"}, Ref::no, "out must have v's Dv = 7, has 11"},
      {"out_value_dim_is_d", Base::full, [](P& p) { reshape(p.out, 2, 6, 5, 4); }, "out", {"4", "7"},
       Ref::no, "Dv != D slip: out sized with D = 4 instead of Dv = 7"},
      {"heads_not_multiple", Base::full,
       [](P& p) { reshape(p.k, 2, 4, 8, 4); reshape(p.v, 2, 4, 8, 7); }, "k", {"4", "6"}, Ref::yes,
       "GQA needs Hq % Hkv == 0: 6 % 4 != 0"},
      {"kv_heads_more_than_q", Base::full,
       [](P& p) { reshape(p.k, 2, 12, 8, 4); reshape(p.v, 2, 12, 8, 7); }, "k", {"12", "6"},
       Ref::yes, "Hkv = 12 > Hq = 6 cannot be a GQA grouping"},
      {"kv_heads_zero", Base::full,
       [](P& p) { reshape(p.k, 2, 0, 8, 4); reshape(p.v, 2, 0, 8, 7); }, "k", {"0", "6"}, Ref::yes,
       "6 query heads need at least one key/value head (and Hq % 0 must not be evaluated)"},

      // --- Negative dimensions, consistent across tensors; strides stay those of the positive
      // shape, so only the sign of the dimension is wrong.
      {"negative_batch", Base::plain,
       [](P& p) { p.q.shape[0] = p.k.shape[0] = p.v.shape[0] = p.out.shape[0] = -2; }, "q",
       {"-2"}, Ref::yes, "B = -2"},
      {"negative_heads", Base::plain,
       [](P& p) { p.q.shape[1] = p.out.shape[1] = -6; p.k.shape[1] = p.v.shape[1] = -3; }, "q",
       {"-6"}, Ref::yes, "Hq = -6, Hkv = -3 (-6 % -3 == 0 must not make it pass)"},
      {"negative_query_length", Base::plain, [](P& p) { p.q.shape[2] = p.out.shape[2] = -5; }, "q",
       {"-5"}, Ref::yes, "Lq = -5"},
      {"negative_key_length", Base::plain, [](P& p) { p.k.shape[2] = p.v.shape[2] = -8; }, "k",
       {"-8"}, Ref::yes, "Lk = -8"},
      {"negative_head_dim", Base::plain, [](P& p) { p.q.shape[3] = p.k.shape[3] = -4; }, "q",
       {"-4"}, Ref::yes, "D = -4"},
      {"negative_value_dim", Base::plain, [](P& p) { p.v.shape[3] = p.out.shape[3] = -7; }, "v",
       {"-7"}, Ref::yes, "Dv = -7"},

      // --- Strides.
      {"q_inner_stride_2", Base::full, [](P& p) { p.q.strides[3] = 2; }, "q", {"2"}, Ref::yes,
       "the innermost (D) stride must be 1"},
      {"k_inner_stride_0", Base::full, [](P& p) { p.k.strides[3] = 0; }, "k", {"0"}, Ref::yes,
       "a broadcast head dimension is not a layout the kernel reads"},
      {"out_inner_stride_2", Base::full, [](P& p) { p.out.strides[3] = 2; }, "out", {"2"}, Ref::no,
       "the innermost (D) stride must be 1"},
      {"q_negative_stride_with_size", Base::full,
       [](P& p) { p.q.strides[0] = -120; p.q.size = 240; }, "q", {"-120"}, Ref::yes,
       "batch 1 would sit at offset -120, outside the 240-element buffer"},
      {"out_rows_overlap", Base::full, [](P& p) { p.out.strides[2] = 0; }, "out", {"0"}, Ref::no,
       "all 5 rows of out would be written to the same memory (PyTorch rejects internally "
       "overlapping outputs; with threads it is a data race)"},

      // --- `size` too small for what the view addresses.
      {"q_size_one_short", Base::full, [](P& p) { p.q.size = 239; }, "q", {"240", "239"}, Ref::yes,
       "q addresses 2*6*5*4 = 240 elements"},
      {"k_size_zero", Base::full, [](P& p) { p.k.size = 0; }, "k", {"192", "0"}, Ref::yes,
       "k addresses 2*3*8*4 = 192 elements"},
      {"v_size_one_short", Base::full, [](P& p) { p.v.size = 335; }, "v", {"336", "335"}, Ref::yes,
       "v addresses 2*3*8*7 = 336 elements"},
      {"out_size_one_short", Base::full, [](P& p) { p.out.size = 419; }, "out", {"420", "419"},
       Ref::no, "out addresses 2*6*5*7 = 420 elements"},
      {"q_padded_rows_size_one_short", Base::full,
       [](P& p) { set_raw(p.q, {2, 6, 5, 4}, {180, 30, 6, 1}); p.q.size = 357; }, "q",
       {"358", "357"}, Ref::yes,
       "rows padded to 6: the last element is at 180 + 5*30 + 4*6 + 3 = 357, so 358 are needed"},
      {"q_size_negative_not_minus_one", Base::full, [](P& p) { p.q.size = -5; }, "q", {"-5"},
       Ref::yes, "only -1 means 'unknown'; -5 is a corrupted length, not a request to trust"},

      // --- Null data with elements to read or write.
      {"q_null", Base::full, [](P& p) { p.q.data = nullptr; }, "q", {}, Ref::yes,
       "q has 240 elements but no data"},
      {"k_null", Base::full, [](P& p) { p.k.data = nullptr; }, "k", {}, Ref::yes,
       "k has 192 elements but no data"},
      {"v_null", Base::full, [](P& p) { p.v.data = nullptr; }, "v", {}, Ref::yes,
       "v has 336 elements but no data"},
      {"out_null", Base::full, [](P& p) { p.out.data = nullptr; }, "out", {}, Ref::no,
       "out has 420 elements but no data"},
      {"key_lengths_null_data", Base::full,
       [](P& p) { p.opt.key_lengths = Span<int32_t>(nullptr, 2); }, "key_lengths", {}, Ref::yes,
       "a length-2 span without data must not silently drop the padding mask"},

      // --- Per-batch lengths.
      {"key_lengths_count_3", Base::full,
       [](P& p) { p.key_lengths = {8, 6, 8}; p.opt.key_lengths = p.key_lengths; }, "key_lengths",
       {"2", "3"}, Ref::yes, "one key length per batch: 2 expected, 3 given"},
      {"key_lengths_above_lk", Base::full,
       [](P& p) { p.key_lengths = {8, 9}; p.opt.key_lengths = p.key_lengths; }, "key_lengths",
       {"9", "8"}, Ref::yes, "key length 9 > Lk = 8 would read past k and v"},
      {"key_lengths_negative", Base::full,
       [](P& p) { p.key_lengths = {-1, 6}; p.opt.key_lengths = p.key_lengths; }, "key_lengths",
       {"-1"}, Ref::yes, "key length -1 < 0"},
      {"query_lengths_count_1", Base::full,
       [](P& p) { p.query_lengths = {5}; p.opt.query_lengths = p.query_lengths; }, "query_lengths",
       {"2", "1"}, Ref::yes, "one query length per batch: 2 expected, 1 given"},
      {"query_lengths_above_lq", Base::full,
       [](P& p) { p.query_lengths = {6, 4}; p.opt.query_lengths = p.query_lengths; },
       "query_lengths", {"6", "5"}, Ref::yes, "query length 6 > Lq = 5"},
      {"query_lengths_negative", Base::full,
       [](P& p) { p.query_lengths = {5, -2}; p.opt.query_lengths = p.query_lengths; },
       "query_lengths", {"-2"}, Ref::yes, "query length -2 < 0"},

      // --- Masks that cannot broadcast to [B, Hq, Lq, Lk] = [2, 6, 5, 8].
      {"allowed_lq_dim_3", Base::full,
       [](P& p) { p.opt.allowed = maskattn::make_mask<uint8_t>(p.allowed_buf.data(), 2, 1, 3, 8); },
       "allowed", {"3", "5"}, Ref::yes, "dim 3 where Lq = 5 (or 1) is expected"},
      {"allowed_heads_is_hkv", Base::full,
       [](P& p) { p.opt.allowed = maskattn::make_mask<uint8_t>(p.allowed_buf.data(), 2, 3, 5, 8); },
       "allowed", {"3", "6"}, Ref::yes, "mask sized with Hkv = 3; it broadcasts to Hq = 6"},
      {"allowed_batch_11", Base::full,
       [](P& p) { p.opt.allowed = maskattn::make_mask<uint8_t>(p.allowed_buf.data(), 11, 1, 5, 8); },
       "allowed", {"11", "2"}, Ref::yes, "dim 11 where B = 2 (or 1) is expected"},
      {"allowed_lk_dim_13", Base::full,
       [](P& p) { p.opt.allowed = maskattn::make_mask<uint8_t>(p.allowed_buf.data(), 2, 1, 5, 13); },
       "allowed", {"13", "8"}, Ref::yes, "dim 13 where Lk = 8 (or 1) is expected"},
      {"allowed_lk_stride_2", Base::full,
       [](P& p) {
         auto& m = p.opt.allowed;
         m.strides[0] = 80; m.strides[1] = 0; m.strides[2] = 16; m.strides[3] = 2; m.size = 160;
       },
       "allowed", {"2"}, Ref::yes, "the mask's Lk stride must be 0 or 1"},
      {"allowed_size_one_short", Base::full, [](P& p) { p.opt.allowed.size = 79; }, "allowed",
       {"80", "79"}, Ref::yes, "a [2,1,5,8] mask needs 80 elements"},
      {"bias_lk_dim_11", Base::full,
       [](P& p) { p.opt.bias = maskattn::make_mask<float>(p.bias_buf.data(), 1, 6, 1, 11); }, "bias",
       {"11", "8"}, Ref::yes, "dim 11 where Lk = 8 (or 1) is expected"},
      {"bias_lq_dim_9", Base::full,
       [](P& p) { p.opt.bias = maskattn::make_mask<float>(p.bias_buf.data(), 1, 6, 9, 8); }, "bias",
       {"9", "5"}, Ref::yes, "dim 9 where Lq = 5 (or 1) is expected"},
      {"bias_negative_dim", Base::full,
       [](P& p) { p.opt.bias.shape[3] = -8; }, "bias", {"-8"}, Ref::yes, "mask dim -8"},
      {"bias_transposed_lk_stride_5", Base::full,
       [](P& p) {
         auto& m = p.opt.bias;
         m.shape[2] = 5;
         m.strides[0] = 0; m.strides[1] = 40; m.strides[2] = 1; m.strides[3] = 5; m.size = 240;
       },
       "bias", {"5"}, Ref::yes, "a [Lk, Lq]-major (transposed) mask has Lk stride 5"},

      // --- Window, prefix, segments, ALiBi, softcap, scale.
      {"window_left_minus_2", Base::full, [](P& p) { p.opt.window.left = -2; }, "window", {"-2"},
       Ref::yes, "below -1 (-1 = unbounded)"},
      {"window_right_minus_5", Base::full, [](P& p) { p.opt.window.right = -5; }, "window", {"-5"},
       Ref::yes, "below -1 (-1 = unbounded)"},
      {"window_left_int64_min", Base::full, [](P& p) { p.opt.window.left = kInt64Min; }, "window",
       {}, Ref::yes, "below -1; d(i) - left would overflow"},
      {"prefix_minus_1", Base::full, [](P& p) { p.opt.prefix = -1; }, "prefix", {"-1"}, Ref::yes,
       "a prefix length cannot be negative"},
      {"query_segments_short", Base::full,
       [](P& p) { p.opt.query_segments = Span<int32_t>(p.query_segments.data(), 9); },
       "query_segments", {"10", "9"}, Ref::yes, "B*Lq = 10 ids needed, 9 given"},
      {"key_segments_per_batch_only", Base::full,
       [](P& p) { p.opt.key_segments = Span<int32_t>(p.key_segments.data(), 8); }, "key_segments",
       {"16", "8"}, Ref::yes, "B*Lk = 16 ids needed; 8 is one batch's worth"},
      {"key_segments_without_query_segments", Base::full,
       [](P& p) { p.opt.query_segments = Span<int32_t>(); }, "query_segments", {}, Ref::yes,
       "segment masking needs ids on both sides; half of it must not silently disable it"},
      {"alibi_count_is_hkv", Base::full,
       [](P& p) { p.opt.alibi_slopes = Span<float>(p.slopes.data(), 3); }, "alibi_slopes",
       {"6", "3"}, Ref::yes, "one slope per query head: 6 expected, 3 (Hkv) given"},
      {"alibi_nan", Base::full, [](P& p) { p.slopes[2] = kNaN; }, "alibi_slopes", {"nan"},
       Ref::yes, "a NaN slope would poison every score of its head"},
      {"softcap_negative", Base::full, [](P& p) { p.opt.softcap = -1.0f; }, "softcap", {"-1"},
       Ref::yes, "softcap must be >= 0 (0 = off)"},
      {"softcap_nan", Base::full, [](P& p) { p.opt.softcap = kNaN; }, "softcap", {"nan"}, Ref::yes,
       "NaN softcap"},
      {"softcap_inf", Base::full, [](P& p) { p.opt.softcap = kInf; }, "softcap", {"inf"}, Ref::yes,
       "inf * tanh(s / inf) = inf * 0 = NaN"},
      {"scale_nan", Base::full, [](P& p) { p.opt.scale = kNaN; }, "scale", {"nan"}, Ref::yes,
       "non-finite scale"},
      {"scale_inf", Base::full, [](P& p) { p.opt.scale = kInf; }, "scale", {"inf"}, Ref::yes,
       "non-finite scale"},
      {"scale_minus_inf", Base::full, [](P& p) { p.opt.scale = -kInf; }, "scale", {"-inf"},
       Ref::yes, "non-finite scale"},

      // --- Optional outputs and run settings.
      {"weights_size_one_short", Base::full, [](P& p) { p.extra.weights_size = 479; }, "weights",
       {"480", "479"}, Ref::no, "weights is [2,6,5,8] = 480 elements"},
      {"weights_size_is_lse_size", Base::full, [](P& p) { p.extra.weights_size = 60; }, "weights",
       {"480", "60"}, Ref::no, "buffers swapped: weights given lse's 60 elements"},
      {"weights_size_negative_not_minus_one", Base::full, [](P& p) { p.extra.weights_size = -2; },
       "weights", {"-2"}, Ref::no, "only -1 means 'trust the shape'"},
      {"lse_size_one_short", Base::full, [](P& p) { p.extra.lse_size = 59; }, "lse", {"60", "59"},
       Ref::no, "lse is [2,6,5] = 60 elements"},
      {"threads_0", Base::full, [](P& p) { p.opt.threads = 0; }, "threads", {"0"}, Ref::no,
       "at least one thread"},
      {"threads_minus_3", Base::full, [](P& p) { p.opt.threads = -3; }, "threads", {"-3"}, Ref::no,
       "at least one thread"},
      {"threads_one_past_the_limit", Base::full, [](P& p) { p.opt.threads = 1025; }, "threads",
       {"1024", "1025"}, Ref::no, "kMaxThreads = 1024 is the most, and the message says so"},
      {"fully_masked_7", Base::full,
       [](P& p) { p.opt.fully_masked = static_cast<maskattn::FullyMasked>(7); }, "fully_masked",
       {"7"}, Ref::yes, "not one of zero / nan / uniform (e.g. a bad cast from a binding)"},
      {"align_9", Base::full, [](P& p) { p.opt.align = static_cast<maskattn::Align>(9); }, "align",
       {"9"}, Ref::yes, "not one of bottom_right / top_left"},
      {"target_99", Base::full, [](P& p) { p.opt.target = static_cast<maskattn::Target>(99); },
       "target", {}, Ref::no, "not a target"},
      {"target_unavailable", Base::full,
       [](P& p) {
         using T = maskattn::Target;
         p.opt.target = static_cast<T>(99);
         for (T t : maskattn::kKernelTargets)
           if (!maskattn::target_available(t)) { p.opt.target = t; break; }
       },
       "target", {}, Ref::no,
       "an explicitly requested target that cannot run here must not fall back silently"},

      // --- Sizes far beyond memory: must throw, never allocate, wrap around or crash.
      {"huge_l_and_d_2p40", Base::plain,
       [](P& p) {
         p.no_outputs();
         for (auto* t : {&p.q, &p.k, &p.v}) set_raw(*t, {1, 1, pow2(40), pow2(40)}, {0, 0, pow2(40), 1});
         set_raw(p.out, {1, 1, pow2(40), pow2(40)}, {0, 0, pow2(40), 1});
       },
       "q", {}, Ref::yes, "2^40 x 2^40 elements: the count overflows int64", true},
      {"huge_bytes_2p62_elements", Base::plain,
       [](P& p) {
         p.no_outputs();
         for (auto* t : {&p.q, &p.k, &p.v}) set_raw(*t, {1, 1, pow2(31), pow2(31)}, {0, 0, pow2(31), 1});
         set_raw(p.out, {1, 1, pow2(31), pow2(31)}, {0, 0, pow2(31), 1});
       },
       "q", {}, Ref::yes, "2^62 elements fit int64 but their 2^64 bytes do not", true},
      {"huge_q_stride", Base::plain,
       [](P& p) {
         p.no_outputs();
         p.set_dims(4, 1, 1, 1, 1, 1, 1);
         p.q.strides[0] = pow2(62);
       },
       "q", {}, Ref::yes, "batch 3 sits at offset 3 * 2^62, which overflows int64", true},
      {"huge_out_stride", Base::full, [](P& p) { p.out.strides[1] = pow2(61); }, "out", {}, Ref::no,
       "head 5 of out sits at offset 5 * 2^61, which overflows int64", true},
      {"huge_allowed_stride", Base::full,
       [](P& p) { p.opt.allowed.strides[0] = kInt64Max; p.opt.allowed.size = -1; }, "allowed", {},
       Ref::yes, "batch 1 of the mask sits at offset 2^63 - 1 + ..., which overflows int64", true},
      {"huge_weights", Base::plain,
       [](P& p) {
         p.no_outputs();
         // Lengths stay modest (2^23, a limit a library may reasonably impose); heads do the rest.
         set_raw(p.q, {1, pow2(16), pow2(23), 0}, {0, 0, 0, 1});
         set_raw(p.k, {1, 1, pow2(23), 0}, {0, 0, 0, 1});
         set_raw(p.v, {1, 1, pow2(23), 0}, {0, 0, 0, 1});
         set_raw(p.out, {1, pow2(16), pow2(23), 0}, {0, 0, 0, 1});
         p.extra.weights = p.wbuf.data();  // size -1: trust the shape
       },
       "weights", {}, Ref::no,
       "q, k, v and out are empty (D = 0) but weights [1,2^16,2^23,2^23] is 2^64 bytes", true},
      {"huge_lse", Base::plain,
       [](P& p) {
         p.no_outputs();
         set_raw(p.q, {pow2(21), pow2(21), pow2(21), 0}, {0, 0, 0, 1});
         set_raw(p.k, {pow2(21), 1, 1, 0}, {0, 0, 0, 1});
         set_raw(p.v, {pow2(21), 1, 1, 0}, {0, 0, 0, 1});
         set_raw(p.out, {pow2(21), pow2(21), pow2(21), 0}, {0, 0, 0, 1});
         p.extra.lse = p.lbuf.data();  // size -1: trust the shape
       },
       // lse's count B*Hq*Lq is q's shape product before D, so naming q is as right as lse.
       "lse|q", {}, Ref::yes, "empty tensors (D = 0) but lse [2^21,2^21,2^21] is 2^63 elements",
       true, /*ref_arg=*/"q|lse|weights"},
      {"huge_lk_empty_tensors", Base::plain,
       [](P& p) {
         p.no_outputs();
         set_raw(p.q, {1, 1, 1, 0}, {0, 0, 0, 1});
         set_raw(p.k, {1, 1, pow2(62), 0}, {0, 0, 0, 1});
         set_raw(p.v, {1, 1, pow2(62), 0}, {0, 0, 0, 1});
         set_raw(p.out, {1, 1, 1, 0}, {0, 0, 0, 1});
         p.extra.lse = p.lbuf.data();
         p.extra.lse_size = 1;
       },
       "k", {}, Ref::yes,
       "2^62 keys with D = 0: no tensor has an element, but the lse needs a pass over 2^62 keys "
       "(scratch for K/V rows overflows); must not hang or wrap around",
       true},
      {"huge_lk_int64_max_empty_tensors", Base::plain,
       [](P& p) {
         p.no_outputs();
         set_raw(p.q, {1, 1, 1, 0}, {0, 0, 0, 1});
         set_raw(p.k, {1, 1, kInt64Max, 0}, {0, 0, 0, 1});
         set_raw(p.v, {1, 1, kInt64Max, 0}, {0, 0, 0, 1});
         set_raw(p.out, {1, 1, 1, 0}, {0, 0, 0, 1});
         p.extra.lse = p.lbuf.data();
         p.extra.lse_size = 1;
       },
       "k", {}, Ref::yes, "Lk = 2^63 - 1: any Lk + padding arithmetic wraps around", true},
      // In a 32-bit address space (wasm32) a view of 2^32 floats (16 GiB) cannot exist: its byte
      // count overflows size_t. Natively it is a legitimate view of unknown size, so the row skips.
      {"huge_for_32bit_address_space", Base::plain,
       [](P& p) {
         p.no_outputs();
         for (auto* t : {&p.q, &p.k, &p.v}) set_raw(*t, {1, 1, pow2(16), pow2(16)}, {0, 0, pow2(16), 1});
         set_raw(p.out, {1, 1, pow2(16), pow2(16)}, {0, 0, pow2(16), 1});
       },
       "q", {}, Ref::yes, "2^32 floats = 2^34 bytes overflow a 32-bit size_t", true, {},
       /*only_32bit=*/true},
  };
  return cases;
}

std::vector<BadCase> reference_cases() {
  std::vector<BadCase> out;
  for (const auto& c : bad_cases())
    if (c.ref == Ref::yes) out.push_back(c);
  return out;
}

std::string case_name(const testing::TestParamInfo<BadCase>& info) { return info.param.name; }

class ValidationRejects : public testing::TestWithParam<BadCase> {};

// A row that is only impossible in a 32-bit address space describes a legitimate view here.
bool legitimate_here(const BadCase& c) { return c.only_32bit && sizeof(size_t) >= 8; }

TEST_P(ValidationRejects, Attention) {
  const BadCase& c = GetParam();
  if (legitimate_here(c)) GTEST_SKIP() << "a 64-bit address space can hold it";
  auto p = make(c.base);
  c.mutate(*p);
  expect_argument_error([&] { p->call(); }, c.arg, c.says, c.why);
  expect_nothing_written(*p);
}

INSTANTIATE_TEST_SUITE_P(Validation, ValidationRejects, testing::ValuesIn(bad_cases()), case_name);

class ValidationRejectsReference : public testing::TestWithParam<BadCase> {};

TEST_P(ValidationRejectsReference, ReferenceAttention) {
  const BadCase& c = GetParam();
  if (legitimate_here(c)) GTEST_SKIP() << "a 64-bit address space can hold it";
  auto p = make(c.base);
  c.mutate(*p);
  expect_argument_error([&] { (void)p->reference(); }, c.ref_arg.empty() ? c.arg : c.ref_arg,
                        c.says, c.why);
}

INSTANTIATE_TEST_SUITE_P(Validation, ValidationRejectsReference, testing::ValuesIn(reference_cases()),
                         case_name);

// reference_attention always returns weights [B, Hq, Lq, Lk] (in double precision), so it must
// refuse a problem whose weights cannot exist even when attention() is asked for none. Only the
// reference is called: attention() would have 2^62 (empty) pairs to visit.
TEST(ValidationReferenceOnly, WeightsThatCannotExist) {
  auto p = make(Base::plain);
  p->no_outputs();
  set_raw(p->q, {1, pow2(16), pow2(23), 0}, {0, 0, 0, 1});
  set_raw(p->k, {1, 1, pow2(23), 0}, {0, 0, 0, 1});
  set_raw(p->v, {1, 1, pow2(23), 0}, {0, 0, 0, 1});
  expect_argument_error([&] { (void)p->reference(); }, "weights|q|k", {},
                        "weights [1,2^16,2^23,2^23] doubles is 2^65 bytes");
}

// ---------------------------------------------------------------------------------------------
// Accepted inputs: valid edge shapes and boundary values must not be rejected, and must give the
// reference's answer (computed with `equivalent` applied too, when the row has one).
// ---------------------------------------------------------------------------------------------
struct GoodCase {
  std::string name;
  Base base;
  std::function<void(Problem&)> mutate;
  const char* why;
  std::function<void(Problem&)> equivalent = {};  // reference computed with this instead
};
void PrintTo(const GoodCase& c, std::ostream* os) { *os << c.name; }

void to_blhd(Problem& p) {
  p.q = maskattn::blhd<const float>(p.qbuf.data(), p.B, p.Lq, p.Hq, p.D);
  p.k = maskattn::blhd<const float>(p.kbuf.data(), p.B, p.Lk, p.Hkv, p.D);
  p.v = maskattn::blhd<const float>(p.vbuf.data(), p.B, p.Lk, p.Hkv, p.Dv);
  p.out = maskattn::blhd(p.obuf.data(), p.B, p.Lq, p.Hq, p.Dv);
}

const std::vector<GoodCase>& good_cases() {
  static const std::vector<GoodCase> cases = {
      {"baseline_plain", Base::plain, [](P&) {}, "the plain baseline itself is valid"},
      {"baseline_full", Base::full, [](P&) {}, "every option at once, all valid"},
      {"lq_zero", Base::plain, [](P& p) { p.set_dims(2, 6, 3, 0, 8, 4, 7); }, "no query rows"},
      {"lk_zero", Base::plain, [](P& p) { p.set_dims(2, 6, 3, 5, 0, 4, 7); },
       "no keys: every row fully masked (O = 0, lse = -inf)"},
      {"lq_and_lk_zero", Base::plain, [](P& p) { p.set_dims(2, 6, 3, 0, 0, 4, 7); }, "both empty"},
      {"batch_zero", Base::plain, [](P& p) { p.set_dims(0, 6, 3, 5, 8, 4, 7); }, "B = 0"},
      {"heads_zero", Base::plain, [](P& p) { p.set_dims(2, 0, 0, 5, 8, 4, 7); },
       "Hq = Hkv = 0 (0 % 0 must not be evaluated)"},
      {"head_dim_zero", Base::plain, [](P& p) { p.set_dims(2, 6, 3, 5, 8, 0, 7); },
       "D = 0: all scores 0, uniform weights over the allowed keys"},
      {"value_dim_zero", Base::plain, [](P& p) { p.set_dims(2, 6, 3, 5, 8, 4, 0); },
       "Dv = 0: empty output rows, weights and lse still defined"},
      {"empty_with_null_pointers", Base::plain,
       [](P& p) {
         p.set_dims(0, 6, 3, 5, 8, 4, 7);
         p.q.data = p.k.data = p.v.data = nullptr;
         p.out.data = nullptr;
       },
       "B = 0: null data is fine when there are no elements"},
      {"key_lengths_zero_with_lk_zero", Base::plain,
       [](P& p) {
         p.set_dims(2, 6, 3, 5, 0, 4, 7);
         p.key_lengths = {0, 0};
         p.opt.key_lengths = p.key_lengths;
       },
       "length 0 is inside [0, Lk = 0]"},
      {"mqa_one_kv_head", Base::plain, [](P& p) { p.set_dims(2, 6, 1, 5, 8, 4, 7); }, "Hkv = 1"},
      {"mha_kv_heads_equal", Base::plain, [](P& p) { p.set_dims(2, 6, 6, 5, 8, 4, 7); },
       "Hkv = Hq"},
      {"lengths_at_bounds", Base::full,
       [](P& p) {
         p.key_lengths = {0, 8};
         p.query_lengths = {0, 5};
         p.opt.key_lengths = p.key_lengths;
         p.opt.query_lengths = p.query_lengths;
       },
       "0 and L are both inside [0, L]"},
      {"window_zero", Base::full, [](P& p) { p.opt.window = {0, 0}; }, "a window of 0 each side"},
      {"window_huge_is_unbounded", Base::full,
       [](P& p) { p.opt.causal = false; p.opt.window = {kInt64Max, kInt64Max}; },
       "a window wider than any sequence allows what -1 (unbounded) allows; d(i) +- window must "
       "not overflow",
       [](P& p) { p.opt.window = {-1, -1}; }},
      {"prefix_beyond_lk", Base::full, [](P& p) { p.opt.prefix = 100; }, "prefix > Lk is allowed"},
      {"prefix_huge_is_lk", Base::full, [](P& p) { p.opt.prefix = kInt64Max; },
       "a prefix covering every key equals prefix = Lk",
       [](P& p) { p.opt.prefix = 8; }},
      {"scale_zero", Base::full, [](P& p) { p.opt.scale = 0.0f; }, "scale 0 is finite"},
      {"scale_negative", Base::full, [](P& p) { p.opt.scale = -0.5f; }, "negative scale is finite"},
      {"softcap_zero_is_off", Base::full, [](P& p) { p.opt.softcap = 0.0f; }, "0 = off"},
      {"threads_at_the_limit", Base::full, [](P& p) { p.opt.threads = maskattn::kMaxThreads; },
       "kMaxThreads (1024) threads are allowed; results do not depend on the count"},
      {"mask_broadcast_everything", Base::full,
       [](P& p) {
         p.opt.allowed = maskattn::make_mask<uint8_t>(p.allowed_buf.data() + 1, 1, 1, 1, 1, 1);
       },
       "a single-element mask broadcasts everywhere"},
      {"mask_stride_zero_full_shape", Base::full,
       [](P& p) {
         auto& m = p.opt.bias;
         m.shape[0] = 2; m.shape[1] = 6; m.shape[2] = 5; m.shape[3] = 8;
         m.strides[0] = 0; m.strides[1] = 0; m.strides[2] = 0; m.strides[3] = 1; m.size = 8;
       },
       "stride-0 dimensions broadcast even at full size; 8 elements suffice"},
      {"mask_size1_dims_any_stride", Base::full,
       [](P& p) {
         auto& m = p.opt.allowed;
         m = maskattn::make_mask<uint8_t>(p.allowed_buf.data(), 1, 1, 1, 8, 8);
         m.strides[0] = m.strides[1] = m.strides[2] = 999;
       },
       "a size-1 dimension is only ever indexed at 0, whatever its stride"},
      {"q_padded_rows_exact_size", Base::full,
       [](P& p) { set_raw(p.q, {2, 6, 5, 4}, {180, 30, 6, 1}); p.q.size = 358; },
       "the view addresses exactly 358 elements"},
      {"sizes_larger_than_needed", Base::full,
       [](P& p) { p.q.size = p.k.size = p.v.size = p.out.size = kCap; },
       "a view may live in a larger buffer"},
      {"blhd_layout", Base::full, [](P& p) { to_blhd(p); }, "sequence-major layout"},
      {"top_left", Base::full, [](P& p) { p.opt.align = maskattn::Align::top_left; },
       "the other alignment"},
      {"policy_nan", Base::full, [](P& p) { p.opt.fully_masked = maskattn::FullyMasked::nan; },
       "valid policy"},
      {"policy_uniform", Base::full,
       [](P& p) { p.opt.fully_masked = maskattn::FullyMasked::uniform; }, "valid policy"},
      {"threads_2", Base::full, [](P& p) { p.opt.threads = 2; },
       "more threads than rows of work is fine (and ignored where there are no threads)"},
  };
  return cases;
}

std::string good_name(const testing::TestParamInfo<GoodCase>& info) { return info.param.name; }

class ValidationAccepts : public testing::TestWithParam<GoodCase> {};

TEST_P(ValidationAccepts, RunsAndMatchesReference) {
  const GoodCase& c = GetParam();
  auto p = make(c.base);
  c.mutate(*p);
  try {
    p->call();
  } catch (const ArgumentError& e) {
    FAIL() << "valid input rejected: argument() = \"" << e.argument() << "\", what() = " << e.what()
           << "\n  why valid: " << c.why;
  }
  auto r = make(c.base);
  c.mutate(*r);
  if (c.equivalent) c.equivalent(*r);
  maskattn::ReferenceResult ref;
  try {
    ref = r->reference();
  } catch (const ArgumentError& e) {
    FAIL() << "reference_attention rejected valid input: argument() = \"" << e.argument()
           << "\", what() = " << e.what() << "\n  why valid: " << c.why;
  }
  expect_matches(*p, ref);
}

INSTANTIATE_TEST_SUITE_P(Validation, ValidationAccepts, testing::ValuesIn(good_cases()), good_name);

// ---------------------------------------------------------------------------------------------
// The library stays usable after errors: after each rejected call, a valid call gives bit for bit
// what it gave before any error, and that matches the reference.
// ---------------------------------------------------------------------------------------------
TEST(ValidationRecovery, ValidCallsAfterErrorsAreUnaffected) {
  auto before = make(Base::full);
  before->call();
  expect_matches(*before, before->reference());

  int errors = 0;
  for (const auto& c : bad_cases()) {
    if (c.huge) continue;  // covered by their own rows; here only errors the library surely survives
    auto bad = make(c.base);
    c.mutate(*bad);
    try {
      bad->call();
    } catch (const std::exception&) {
      ++errors;
    }
    auto good = make(Base::full);
    good->call();
    for (size_t i = 0; i < good->obuf.size(); ++i)
      if (!(good->obuf[i] == before->obuf[i])) {
        ADD_FAILURE() << "after the error of row " << c.name << ", out[" << i << "] is "
                      << good->obuf[i] << ", before any error it was " << before->obuf[i];
        break;
      }
    EXPECT_TRUE(good->wbuf == before->wbuf) << "weights differ after the error of row " << c.name;
    EXPECT_TRUE(good->lbuf == before->lbuf) << "lse differ after the error of row " << c.name;
  }
  EXPECT_GT(errors, 50);

  auto after = make(Base::full);
  after->call();
  expect_matches(*after, after->reference());
}

}  // namespace
