// Shared helpers of the maskattn GoogleTest suite.
//
//   - Rng: a seeded, platform-independent generator that puts its seed into every failure message
//     (a gtest ScopedTrace lives as long as the Rng). MASKATTN_TEST_SEED=<n> changes the base seed.
//   - kernel_targets() / TargetTest / MASKATTN_INSTANTIATE_FOR_TARGETS: run a TEST_P over every
//     kernel target (all maskattn::Target values but reference and automatic). A target this
//     build or CPU cannot run is skipped with GTEST_SKIP, never silently replaced.
//   - expect_kernel_run / expect_references: an AttentionCase (attention_case.hpp) run, a throw
//     being a test failure.
//   - compare_to_reference: the tolerance policy of docs/semantics.md "Numbers" (see Tolerance).
//   - ErrorLog: the largest errors seen per target, printed once at the end of the run.
//
// Everything here is portable C++17 (no threads, no filesystem): the same binary runs natively
// and under Node on WebAssembly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "maskattn/reference.hpp"
#include "attention_case.hpp"
#include "tensor.hpp"

namespace maskattn {
// gtest prints parameters with this (found by ADL) instead of "4-byte object <03-00 00-00>".
inline void PrintTo(Target t, std::ostream* os);
}  // namespace maskattn

namespace maskattn_test {

using maskattn::Target;

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// Reproducible randomness
// ---------------------------------------------------------------------------------------------

// The base seed: fixed, so runs are repeatable on every platform; MASKATTN_TEST_SEED overrides it
// to explore other inputs (the value in a failure message replays that failure).
inline uint64_t base_seed() {
  const char* s = std::getenv("MASKATTN_TEST_SEED");
  if (s != nullptr && *s != '\0') return std::strtoull(s, nullptr, 0);
  return 0x6d61736b61747431ULL;  // "maskatt1"
}

inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// splitmix64 with hand-written distributions: std::uniform_real_distribution differs between
// libstdc++ and libc++ (Emscripten), and the same seed must give the same data everywhere.
class Rng {
 public:
  // The seed is derived from `label` (e.g. "Masks/causal_decode") and the base seed, so each table
  // row gets its own stream and adding a row does not change the data of the others.
  explicit Rng(const std::string& label) : Rng(fnv1a(label) ^ base_seed(), label) {}
  Rng(const Rng&) = delete;
  Rng& operator=(const Rng&) = delete;

  uint64_t seed() const { return seed_; }

  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits: exactly representable as float.
  float unit() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * unit(); }
  // Uniform integer in [lo, hi] (inclusive).
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(next_u64() % span);
  }
  bool bernoulli(double p) { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53 < p; }

 private:
  Rng(uint64_t seed, const std::string& label)
      : seed_(seed), state_(seed), trace_(__FILE__, __LINE__, describe(seed, label)) {}
  static std::string describe(uint64_t seed, const std::string& label) {
    std::ostringstream os;
    os << "Rng \"" << label << "\" seed 0x" << std::hex << seed << std::dec
       << " (base seed " << base_seed() << ", set MASKATTN_TEST_SEED to change it)";
    return os.str();
  }
  uint64_t seed_;
  uint64_t state_;
  ::testing::ScopedTrace trace_;  // printed with every failure while this Rng lives
};

// ---------------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------------

// Every kernel target: what `automatic` could pick plus the ones it would not. The reference is
// the oracle, not a subject, and `automatic` is one of the others.
inline const std::vector<Target>& kernel_targets() {
  static const std::vector<Target> targets(std::begin(maskattn::kKernelTargets), std::end(maskattn::kKernelTargets));
  return targets;
}

// Test-name suffixes: the library's own target names, which are also the names CMake's ctest
// filters use (tests/CMakeLists.txt, `Targets/*/<name>_*`).
inline const char* target_label(Target t) { return maskattn::target_name(t); }

// A kernel target and which kernel runs on it: every target-parameterised test runs the prefill
// kernel, the decode kernel, and the decode kernel with its keys split into the smallest chunks
// (so the split-K merge is tested on every problem, not only on long ones).
struct KernelTarget {
  Target target;
  maskattn::Kernel kernel;
};

// Every kernel a caller can force (maskattn::kKernels without `automatic`, which picks one of them).
inline std::vector<maskattn::Kernel> forced_kernels() {
  std::vector<maskattn::Kernel> v;
  for (maskattn::Kernel k : maskattn::kKernels)
    if (k != maskattn::Kernel::automatic) v.push_back(k);
  return v;
}

inline const std::vector<KernelTarget>& kernel_target_params() {
  static const std::vector<KernelTarget> params = [] {
    std::vector<KernelTarget> v;
    for (Target t : kernel_targets())
      for (maskattn::Kernel k : forced_kernels()) v.push_back({t, k});
    return v;
  }();
  return params;
}

// "avx2_prefill", "sse2_decode", "simd128_decode_split", "avx512_prefill_split".
inline std::string target_label(const KernelTarget& t) {
  return std::string(maskattn::target_name(t.target)) + "_" + maskattn::kernel_name(t.kernel);
}
inline void PrintTo(const KernelTarget& t, std::ostream* os) { *os << target_label(t); }

// Every cache dtype: the rows of maskattn/kv_types.inc, so a suite that iterates it covers a new one.
inline const std::vector<maskattn::KVType>& kv_types() {
  static const std::vector<maskattn::KVType> types = {
#define MASKATTN_KV_TYPE(name, bits) maskattn::KVType::name,
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
  };
  return types;
}

// The reference's options for a KV cache's attend(opt): a window cache adds the ring's rule
// d(i) - W + 1 <= j <= d(i) (the same problem on a full cache).
inline maskattn::Options cache_reference_options(maskattn::Options o, int64_t window) {
  o.target = maskattn::Target::reference;
  if (window > 0) {
    o.window.left = o.window.left < 0 ? window - 1 : std::min<int64_t>(o.window.left, window - 1);
    o.window.right = 0;
  }
  return o;
}

// A sequence's contents as a KV cache reads them back (KVCache::read) laid out as its full history:
// K [H, L, D] and V [H, L, Dv] with L = start + length, the positions before `start` (overwritten
// by a ring) zero rows that the ring's window never lets a query see.
struct CacheHistory {
  int64_t L = 0;
  std::vector<float> k, v;
};
inline CacheHistory cache_history(const maskattn::KVCache::Contents& c, int64_t H, int64_t D, int64_t Dv) {
  CacheHistory h;
  h.L = c.start + c.length;
  h.k.assign(size_t(H * h.L * D), 0.0f);
  h.v.assign(size_t(H * h.L * Dv), 0.0f);
  for (int64_t head = 0; head < H; ++head)
    for (int64_t i = 0; i < c.length; ++i) {
      std::copy_n(c.key.begin() + (head * c.length + i) * D, D, h.k.begin() + (head * h.L + c.start + i) * D);
      std::copy_n(c.value.begin() + (head * c.length + i) * Dv, Dv, h.v.begin() + (head * h.L + c.start + i) * Dv);
    }
  return h;
}

// Where the decode kernel's P·V over q8/q4 values runs in integers, each tile's weights are
// rounded to int16 against the tile's largest: at most (KT / 65534) x max|V̂| per row, with KT = 64
// keys per tile (docs/semantics.md).
inline double integer_pv_rounding(double max_abs_value) { return 64.0 / 65534.0 * max_abs_value; }
// The targets whose decode kernel does so: integer_pv_target (attention_case.hpp).

// How far a row of a cache with q8/q4 keys may be from the float64 reference over its contents
// (docs/semantics.md, "Quantized caches"): the kernel quantizes the query row for integer dot
// products, which moves each logit by at most δ = scale · |q|₂ / 254 · sqrt(D) · max |k|₂
// (amax of a rotated query block <= |q|₂ and Σ over blocks of |k block|₁ <= sqrt(D) |k|₂, rotated
// or not), so each output element by (e^(2δ) - 1) · max |V|; plus
// the fp32 floor and P·V's integer rounding where it runs.
inline double quantized_query_bound(double scale, double q_norm, int64_t D, double k_norm_max, double v_max,
                                    double pv_rounding) {
  const double delta = scale * q_norm / 254 * std::sqrt(double(D)) * k_norm_max;
  return (std::exp(2 * delta) - 1) * v_max + 1e-5 * std::max(1.0, v_max) + pv_rounding;
}

// f() must throw an ArgumentError naming `argument` (a TypeError-kind one when type_error).
inline void expect_argument_error(const std::function<void()>& f, const std::string& argument, bool type_error = false) {
  try {
    f();
    ADD_FAILURE() << "expected an ArgumentError naming " << argument;
  } catch (const maskattn::ArgumentError& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_EQ(e.is_type_error(), type_error) << e.what();
  }
}

}  // namespace maskattn_test

inline void maskattn::PrintTo(Target t, std::ostream* os) { *os << maskattn_test::target_label(t); }

namespace maskattn_test {

struct TargetParamName {
  std::string operator()(const ::testing::TestParamInfo<KernelTarget>& info) const {
    return target_label(info.param);
  }
};

// ---------------------------------------------------------------------------------------------
// Error log: largest error per target and quantity, printed at the end of the run
// ---------------------------------------------------------------------------------------------

class ErrorLog {
 public:
  struct Entry {
    double max_err = 0;         // largest |kernel - fp64 reference|
    double max_ref32_err = 0;   // largest |naive fp32 - fp64 reference| over the same comparisons
    double worst_ratio = 0;     // largest kernel error / bound of one element (< 1 passes)
    int64_t comparisons = 0;
  };

  static ErrorLog& instance() {
    static ErrorLog log;
    return log;
  }

  void begin_test(const KernelTarget& t) {
    current_ = target_label(t);
    test_max_err_ = 0;
    test_cases_ = 0;
    active_ = true;
  }
  void end_test() { active_ = false; }
  bool active() const { return active_; }

  void record(const std::string& quantity, double err, double ref32_err, double ratio) {
    if (!active_) return;
    Entry& e = entries_[current_][quantity];
    e.max_err = std::max(e.max_err, err);
    e.max_ref32_err = std::max(e.max_ref32_err, ref32_err);
    e.worst_ratio = std::max(e.worst_ratio, ratio);
    ++e.comparisons;
    test_max_err_ = std::max(test_max_err_, err);
  }
  // One differential case (one table row) ran on the current target.
  void count_case() {
    if (!active_) return;
    ++cases_[current_];
    ++test_cases_;
  }

  double test_max_err() const { return test_max_err_; }
  int64_t test_cases() const { return test_cases_; }

  void print(std::ostream& os) const {
    if (entries_.empty() && cases_.empty()) return;
    os << "\n[maskattn] kernel vs float64 reference, worst over the run (error bound: "
          "max(2 x naive fp32 error, floor), and <= 1e-5 on O for unit-scale inputs)\n";
    for (const auto& [target, quantities] : entries_) {
      auto it = cases_.find(target);
      os << "  " << std::left << std::setw(8) << target << " cases run: "
         << (it == cases_.end() ? 0 : it->second) << "\n";
      for (const auto& [quantity, e] : quantities) {
        os << "    " << std::left << std::setw(14) << quantity << std::scientific
           << std::setprecision(2) << " max |err| " << e.max_err << "  (naive fp32: "
           << e.max_ref32_err << ")  worst err/bound " << std::fixed << std::setprecision(2)
           << e.worst_ratio << "  comparisons " << e.comparisons << "\n";
      }
    }
    os << std::defaultfloat;
  }

 private:
  std::string current_ = "none";
  bool active_ = false;
  double test_max_err_ = 0;
  int64_t test_cases_ = 0;
  std::map<std::string, std::map<std::string, Entry>> entries_;
  std::map<std::string, int64_t> cases_;
};

class ErrorLogEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { ErrorLog::instance().print(std::cout); }
};
// Registered once for the whole binary (C++17 inline variable), before gtest_main runs the tests.
inline ::testing::Environment* const kErrorLogEnvironment =
    ::testing::AddGlobalTestEnvironment(new ErrorLogEnvironment);

// ---------------------------------------------------------------------------------------------
// The per-target fixture
// ---------------------------------------------------------------------------------------------

class TargetTest : public ::testing::TestWithParam<KernelTarget> {
 protected:
  void SetUp() override {
    const KernelTarget t = GetParam();
    RecordProperty("target", target_label(t));
    if (!maskattn::target_available(t.target)) {
      GTEST_SKIP() << "target " << target_label(t.target)
                   << " is not available in this build or on this CPU";
    }
    trace_.emplace(__FILE__, __LINE__,
                   std::string("target ") + maskattn::target_name(t.target) + " (" +
                       std::to_string(maskattn::target_lanes(t.target)) + " lanes), " +
                       maskattn::kernel_name(t.kernel) + " kernel");
    ErrorLog::instance().begin_test(t);
  }
  void TearDown() override {
    ErrorLog& log = ErrorLog::instance();
    if (log.active()) {
      RecordProperty("cases", static_cast<int>(log.test_cases()));
      std::ostringstream os;
      os << std::scientific << std::setprecision(3) << log.test_max_err();
      RecordProperty("max_abs_err", os.str());
      log.end_test();
    }
    trace_.reset();
  }
  KernelTarget target() const { return GetParam(); }
  // A KV cache's default options (causal) on this test's target and kernel.
  maskattn::Options cache_options() const {
    maskattn::Options o = maskattn::KVCache::default_options();
    o.target = target().target;
    o.kernel = target().kernel;
    return o;
  }

 private:
  std::optional<::testing::ScopedTrace> trace_;
};

#define MASKATTN_INSTANTIATE_FOR_TARGETS(Fixture)                                      \
  INSTANTIATE_TEST_SUITE_P(Targets, Fixture,                                          \
                           ::testing::ValuesIn(::maskattn_test::kernel_target_params()), \
                           ::maskattn_test::TargetParamName())

// ---------------------------------------------------------------------------------------------
// Comparison with the float64 reference: the tolerance policy
// ---------------------------------------------------------------------------------------------
//
// Policy (docs/semantics.md "Numbers", after FlashAttention's test suite): let e32 be the largest
// |naive fp32 - fp64| over the tensor, where "naive fp32" is reference_attention(...,
// Precision::fp32) on the same inputs (a naive loop may sum in any order: callers can pass the
// worst of several orders, as test_differential.cpp does with three orders over D, so that the
// kernel's own order is judged against a fair sample rather than one lucky rounding). The kernel
// passes when, element by element,
//   |kernel - fp64| <= max(2 * e32, floor)
// - 2 * e32: the kernel may reorder sums (tiles, SIMD lanes, online rescaling) but must not lose
//   more than one extra naive implementation's worth of accuracy;
// - floor (default 2e-6, a few fp32 ulps of an O(1) value): tiny problems where the naive fp32
//   result happens to be (almost) exact would otherwise demand bit-exactness;
// - rel_floor * |fp64 value| where set: lse grows with the logits, and so does its rounding;
// and, for unit-scale inputs (uniform in [-1, 1], O(1) logits), never more than `cap` = 1e-5
// absolute on O: the contract's absolute promise, which also catches a naive fp32 reference that
// is itself inaccurate. Non-finite expectations are exact: NaN where fp64 has NaN, the same
// infinity where it has one, and a finite value everywhere else.
struct Tolerance {
  double floor = 2e-6;
  double rel_floor = 0;  // per element: also allow rel_floor * |fp64| (values far from O(1), lse)
  double cap = 1e-5;     // <= 0: no absolute cap
  bool wide = false;  // inputs not unit-scale: logged apart (" (wide)") so they do not hide the rest
};

inline std::string format_index(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t k = dims.size(); k-- > 0;) {
    const int64_t n = std::max<int64_t>(dims[k], 1);
    idx[k] = flat % n;
    flat /= n;
  }
  std::ostringstream os;
  os << "[";
  for (size_t k = 0; k < idx.size(); ++k) os << (k ? "," : "") << idx[k];
  os << "]";
  return os.str();
}

struct Comparison {
  double max_err = 0;    // kernel vs fp64 over finite expectations
  double ref32_err = 0;  // naive fp32 vs fp64
  double bound = 0;      // the bound applied
};

// `got`: kernel result as contiguous `dims`; `ref64`, `ref32`: the reference results on the same
// inputs in double and single precision (`ref32` may be empty: then the bound is `floor`).
// `quantity` names the tensor ("O", "weights", "lse") in messages and in the error log.
inline ::testing::AssertionResult compare_to_reference(const std::string& quantity,
                                                       const std::vector<float>& got,
                                                       const std::vector<double>& ref64,
                                                       const std::vector<double>& ref32,
                                                       const std::vector<int64_t>& dims,
                                                       const Tolerance& tol = {},
                                                       Comparison* result = nullptr) {
  if (got.size() != ref64.size() || (!ref32.empty() && ref32.size() != ref64.size())) {
    return ::testing::AssertionFailure()
           << quantity << ": size mismatch, kernel " << got.size() << " vs reference "
           << ref64.size() << " / " << ref32.size();
  }
  Comparison c;
  for (size_t i = 0; i < ref32.size(); ++i) {
    if (std::isfinite(ref64[i]) && std::isfinite(ref32[i]))
      c.ref32_err = std::max(c.ref32_err, std::fabs(ref32[i] - ref64[i]));
  }
  const double relative_bound = std::max(2.0 * c.ref32_err, tol.floor);
  c.bound = tol.cap > 0 ? std::min(relative_bound, tol.cap) : relative_bound;
  double worst_ratio = 0;  // largest err / bound of an element

  int64_t failures = 0;
  std::ostringstream msg;
  auto fail = [&](size_t i, const char* why) {
    if (failures++ < 6) {
      msg << "\n  " << quantity << format_index(static_cast<int64_t>(i), dims) << ": kernel "
          << std::setprecision(9) << got[i] << ", fp64 reference " << ref64[i];
      if (!ref32.empty()) msg << ", naive fp32 " << ref32[i];
      msg << " (" << why << ")";
    }
  };
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = ref64[i];
    const double g = got[i];
    if (std::isnan(e)) {
      if (!std::isnan(g)) fail(i, "expected NaN");
    } else if (std::isinf(e)) {
      if (g != e) fail(i, "expected this infinity");
    } else if (!std::isfinite(g)) {
      fail(i, "expected a finite value");
    } else {
      const double err = std::fabs(g - e);
      double bound = std::max(c.bound, tol.rel_floor * std::fabs(e));
      if (tol.cap > 0) bound = std::min(bound, tol.cap);
      c.max_err = std::max(c.max_err, err);
      if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
      if (err > bound) fail(i, "error above bound");
    }
  }
  ErrorLog::instance().record(quantity + (tol.wide ? " (wide)" : ""), c.max_err, c.ref32_err,
                              worst_ratio);  // headroom: < 1 passes
  if (result != nullptr) *result = c;
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << quantity << ": " << failures << " of " << got.size()
         << " elements off; max |err| " << c.max_err << ", bound " << c.bound
         << " (naive fp32 error " << c.ref32_err << ", floor " << tol.floor << ", cap " << tol.cap
         << ")" << msg.str();
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// AttentionCase (attention_case.hpp) runs in a GoogleTest suite: a throw is a test failure, and
// the run's (or the references') `ok` stays false.
inline CaseRun expect_kernel_run(const AttentionCase& c, const CaseInputs& in, const maskattn::Options& o) {
  CaseRun r = c.new_outputs();
  try {
    c.run_kernel(in, o, r);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "attention() threw: " << e.what();
  }
  return r;
}
inline CaseReferences expect_references(const AttentionCase& c, const CaseInputs& in,
                                        std::initializer_list<DOrder> orders) {
  try {
    return c.run_reference(in, orders);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "reference_attention() threw (test bug?): " << e.what();
    return {};
  }
}

}  // namespace maskattn_test
