// Conformance suite: the behaviour contract (docs/semantics.md) as tables of rows.
//
// Every row is one problem with a name and a one-line "checks" statement of what it pins down. It
// runs on every kernel target (MASKATTN_INSTANTIATE_FOR_TARGETS) and is compared with the float64
// reference (maskattn/reference.hpp) on O, weights and lse under the tolerance policy of
// test_support.hpp, plus, on every row:
//   - the fully masked rows of the kernel (lse == -inf, which the contract promises under every
//     policy and which no other row can have) are exactly the reference's fully_masked rows;
//   - unless the row says its allowed weights may underflow, weight == 0 exactly iff the reference
//     masks the pair: the same masking decisions on every SIMD width;
//   - rows documented to give NaN (+inf or NaN in an attended bias) are NaN, the others finite.
// Tables:
//   EdgeCases      - every item of the contract's "Edge cases that must work";
//   Interactions   - rules composed, tiles masked at the start / middle, policies, ALiBi, packing;
//   MaskDecisions  - dense element-wise masks at awkward sizes, small logits (exact zero pattern);
//   WorkSkipping   - Options::stats: tiles whose pairs are all masked are skipped (inequalities
//                    only: the tile shape is the kernel's business and differs per target).
// A one-line count of rows per target is printed at the end of the run.
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "maskattn/masks.hpp"
#include "test_support.hpp"

namespace {

using maskattn::Align;
using maskattn::FullyMasked;
using maskattn::Precision;
using maskattn::ReferenceResult;
using maskattn::Stats;
using maskattn::Window;
using namespace maskattn_test;

constexpr float kBig = 3.4e38f;        // close to FLT_MAX

// The contract's lengths: around every SIMD width (1, 4, 8, 16 lanes), query block and key tile.
const int64_t kLengths[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129};

// ---------------------------------------------------------------------------------------------
// Row counter: one line at the end of the run
// ---------------------------------------------------------------------------------------------

struct RowTally {
  std::map<std::string, int64_t> rows, failed;
  std::set<std::string> unavailable;
  static RowTally& get() {
    static RowTally t;
    return t;
  }
};

class ConformanceEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    const RowTally& t = RowTally::get();
    if (t.rows.empty() && t.unavailable.empty()) return;
    std::ostringstream os;
    os << "[maskattn] conformance rows per target:";
    const char* sep = " ";
    for (const auto& [target, n] : t.rows) {
      auto f = t.failed.find(target);
      os << sep << target << " " << n << " (" << (f == t.failed.end() ? 0 : f->second)
         << " failed)";
      sep = ", ";
    }
    if (!t.unavailable.empty()) {
      os << "; not run here:";
      for (const std::string& s : t.unavailable) os << " " << s;
    }
    std::cout << os.str() << std::endl;
  }
};
::testing::Environment* const kConformanceEnvironment =
    ::testing::AddGlobalTestEnvironment(new ConformanceEnvironment);

int64_t failed_parts() {
  const ::testing::TestResult* r =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int64_t n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) n += r->GetTestPartResult(i).failed() ? 1 : 0;
  return n;
}

// ---------------------------------------------------------------------------------------------
// A problem: the shared AttentionCase (attention_case.hpp: sizes, storage, mask rules, inputs, the
// runs), plus what this suite asserts about it
// ---------------------------------------------------------------------------------------------

struct Problem : AttentionCase {
  // Whether weight == 0 <=> masked must hold exactly: false where allowed weights can underflow.
  bool exact_zero_pattern = true;
  // Summation orders over D sampled for "naive fp32" (1 = natural only: for the big stats rows).
  int fp32_orders = 2;
  // Rows [b, h, i] whose O must be entirely NaN (documented: +inf / NaN bias on an attended pair).
  std::vector<std::array<int64_t, 3>> nan_rows;
  // Whether every other row's O must be finite (false where NaN data reaches some O columns).
  bool others_finite = true;
  // Overwrites chosen input values after the random fill.
  std::function<void(CaseInputs&)> tweak;
};

const char* policy_name(FullyMasked p) {
  return p == FullyMasked::zero ? "zero" : p == FullyMasked::nan ? "nan" : "uniform";
}

std::string describe(const Problem& p) {
  std::ostringstream os;
  os << "B=" << p.B << " Hq=" << p.Hq << " Hkv=" << p.Hkv << " Lq=" << p.Lq << " Lk=" << p.Lk
     << " D=" << p.D << " Dv=" << p.Dv << " " << storage_name(p.q_storage);
  if (p.scale) os << " scale=" << *p.scale;
  if (p.causal) os << " causal";
  os << (p.align == Align::bottom_right ? " bottom_right" : " top_left");
  if (p.window.left >= 0 || p.window.right >= 0)
    os << " window=(" << p.window.left << "," << p.window.right << ")";
  if (p.prefix) os << " prefix=" << p.prefix;
  if (p.softcap) os << " softcap=" << p.softcap;
  if (!p.key_lengths.empty()) os << " key_lengths";
  if (!p.query_lengths.empty()) os << " query_lengths";
  if (!p.query_segments.empty()) os << " segments";
  if (!p.alibi.empty()) os << " alibi";
  if (!p.sinks.empty()) os << " sinks";
  if (!p.tree.empty()) os << " tree";
  if (p.bias.present()) os << " bias";
  if (p.allowed.present()) os << " allowed";
  os << " policy=" << policy_name(p.policy);
  return os.str();
}

std::vector<int32_t> lengths(std::initializer_list<int64_t> v) {
  std::vector<int32_t> r;
  for (int64_t x : v) r.push_back(static_cast<int32_t>(x));
  return r;
}

// ALiBi's geometric slopes 2^(-8 i / n), i = 1..n (no power-of-two rounding of n).
std::vector<float> alibi_slopes(int64_t n) {
  std::vector<float> s(static_cast<size_t>(n));
  for (int64_t i = 1; i <= n; ++i)
    s[static_cast<size_t>(i - 1)] =
        static_cast<float>(std::pow(2.0, -8.0 * static_cast<double>(i) / static_cast<double>(n)));
  return s;
}

void random_fill(MaskBuffer<float>& m, Rng& rng, float lo, float hi) {
  for (float& x : m.data) x = rng.uniform(lo, hi);
}
void random_fill(MaskBuffer<uint8_t>& m, Rng& rng, double p_allowed) {
  for (uint8_t& x : m.data) x = rng.bernoulli(p_allowed) ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Running the kernel and the reference
// ---------------------------------------------------------------------------------------------

CaseInputs make_inputs(const Problem& p, Rng& rng) {
  CaseInputs in = p.make_inputs(rng);
  if (p.tweak) p.tweak(in);
  return in;
}

// "Naive fp32" fixes no order of summation: its error is taken as the worse of the natural and
// the reversed order over D, so a kernel summing in another order is judged against a fair sample.
CaseReferences run_reference(const Problem& p, const CaseInputs& in) {
  if (p.fp32_orders > 1) return expect_references(p, in, {DOrder::reversed});
  return expect_references(p, in, {});
}

// The references of a row do not depend on the target (the inputs come from the row's own Rng
// stream), so they are computed once per run and reused by every target. Big rows keep no weights
// (they do not ask for them), so the cache stays small.
const CaseReferences& reference_for(const std::string& key, const Problem& p, const CaseInputs& in) {
  static std::map<std::string, CaseReferences> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  CaseReferences r = run_reference(p, in);
  if (!p.want_weights) {
    r.fp64.weights.clear();
    r.fp32.weights.clear();
  }
  if (!r.ok) {  // not cached: the failure is reported on every target
    static CaseReferences failed;
    failed = std::move(r);
    return failed;
  }
  return cache.emplace(key, std::move(r)).first->second;
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

void check_against_reference(const Problem& p, const CaseRun& r, const CaseReferences& ref) {
  Tolerance tol;
  tol.floor = p.floor;
  if (!p.unit_scale) {
    tol.cap = 0;
    tol.wide = true;
  }
  EXPECT_TRUE(compare_to_reference("O", r.out.dense(), ref.fp64.out, ref.fp32.out,
                                   {p.B, p.Hq, p.Lq, p.Dv}, tol));
  if (p.want_weights)
    EXPECT_TRUE(compare_to_reference("weights", r.weight_values(), ref.fp64.weights, ref.fp32.weights,
                                     {p.B, p.Hq, p.Lq, p.Lk}, tol));
  // lse grows with the logits: no absolute cap, a floor that grows with it (about 16 ulps).
  Tolerance lse_tol;
  lse_tol.cap = 0;
  lse_tol.floor = std::max(4e-6, p.floor);
  lse_tol.rel_floor = 1e-6;
  lse_tol.wide = tol.wide;
  EXPECT_TRUE(
      compare_to_reference("lse", r.lse_values(), ref.fp64.lse, ref.fp32.lse, {p.B, p.Hq, p.Lq}, lse_tol));
}

std::string num(double x) {
  std::ostringstream os;
  os << std::setprecision(9) << x;
  return os.str();
}

// The same masking decisions as the reference: fully masked rows (lse == -inf, under every
// policy) and, where no allowed weight can underflow, the exact zero pattern of the weights.
void check_mask_decisions(const Problem& p, const CaseRun& r, const ReferenceResult& ref) {
  const int64_t rows = p.B * p.Hq * p.Lq;
  int64_t failures = 0;
  std::ostringstream msg;
  auto fail = [&](int64_t row, const std::string& what) {
    if (failures++ < 6)
      msg << "\n  row " << format_index(row, {p.B, p.Hq, p.Lq}) << ": " << what;
  };
  for (int64_t row = 0; row < rows; ++row) {
    const bool want = ref.fully_masked[static_cast<size_t>(row)] != 0;
    const float l = r.lse[static_cast<size_t>(row)];
    // With a sink, a row with no key has lse = the sink instead (and O = 0 under every policy).
    const size_t h = static_cast<size_t>(row / p.Lq % p.Hq);
    const float sink = p.sinks.empty() ? -kInf : p.sinks[h];
    const bool got = sink == -kInf ? (std::isinf(l) && l < 0) : (want && l == sink);
    if (sink != -kInf && !want) continue;  // lse is compared with the reference's
    if (got != want)
      fail(row, want ? "reference: fully masked; kernel lse " + num(l)
                     : "reference: not fully masked; kernel lse -inf");
    if (want || !p.want_weights || !p.exact_zero_pattern) continue;
    const double* w64 = ref.weights.data() + row * p.Lk;
    bool finite = true;
    for (int64_t j = 0; j < p.Lk; ++j) finite = finite && std::isfinite(w64[j]);
    if (!finite) continue;  // a NaN row (documented): checked by the reference comparison
    const float* w = r.weights.data() + row * p.Lk;
    for (int64_t j = 0; j < p.Lk; ++j) {
      const bool masked = w64[j] == 0.0, zero = w[j] == 0.0f;
      if (masked != zero)
        fail(row, "key " + std::to_string(j) + ": kernel weight " + num(w[j]) +
                      (masked ? " but the reference masks the pair"
                              : " but the reference allows the pair (weight " +
                                    num(w64[j]) + ")"));
    }
  }
  EXPECT_EQ(failures, 0) << "masking decisions differ from the reference:" << msg.str();
}

// Documented outcomes: listed rows entirely NaN; every other attended row finite.
void check_nan_rows(const Problem& p, const CaseRun& r, const ReferenceResult& ref) {
  const std::vector<float> out = r.out.dense();
  std::set<int64_t> nan_rows;
  for (const auto& [b, h, i] : p.nan_rows) nan_rows.insert((b * p.Hq + h) * p.Lq + i);
  int64_t failures = 0;
  std::ostringstream msg;
  for (int64_t row = 0; row < p.B * p.Hq * p.Lq; ++row) {
    const bool sink = !p.sinks.empty() && p.sinks[static_cast<size_t>(row / p.Lq % p.Hq)] != -kInf;
    if (ref.fully_masked[static_cast<size_t>(row)] && p.policy == FullyMasked::nan && !sink) continue;
    const bool want_nan = nan_rows.count(row) != 0;
    if (!want_nan && !p.others_finite) continue;
    for (int64_t c = 0; c < p.Dv; ++c) {
      const float x = out[static_cast<size_t>(row * p.Dv + c)];
      const bool ok = want_nan ? std::isnan(x) : std::isfinite(x);
      if (!ok && failures++ < 6)
        msg << "\n  O" << format_index(row * p.Dv + c, {p.B, p.Hq, p.Lq, p.Dv}) << " = " << x
            << (want_nan ? ", documented NaN" : ", want a finite value");
    }
  }
  EXPECT_EQ(failures, 0) << "documented NaN / finite outcome broken:" << msg.str();
}

// ---------------------------------------------------------------------------------------------
// Rows and the fixture
// ---------------------------------------------------------------------------------------------

struct ConformanceRow {
  std::string name;
  std::string checks;  // one line: what this row pins down
  std::function<void(Problem&, Rng&)> setup;
  // WorkSkipping rows only: assertions on the tile counters of the run.
  std::function<void(const Stats&)> expect_stats;
};

class Conformance : public TargetTest {
 protected:
  void SetUp() override {
    TargetTest::SetUp();
    if (IsSkipped()) RowTally::get().unavailable.insert(target_label(target()));
  }

  void run_rows(const std::vector<ConformanceRow>& rows) {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string table = test.substr(0, test.find('/'));
    RowTally& tally = RowTally::get();
    const std::string label = target_label(target());
    for (const ConformanceRow& row : rows) {
      const int64_t failures_before = failed_parts();
      {
        Rng rng("Conformance/" + table + "/" + row.name);
        Problem p;
        row.setup(p, rng);
        SCOPED_TRACE("row " + row.name + " (checks: " + row.checks + "): " + describe(p));
        const CaseInputs in = make_inputs(p, rng);
        const CaseReferences& ref = reference_for(table + "/" + row.name, p, in);
        Stats stats;
        maskattn::Options o = p.options(target().target, target().kernel);
        o.stats = &stats;
        const CaseRun r = expect_kernel_run(p, in, o);
        if (r.ok && ref.ok) {
          check_against_reference(p, r, ref);
          check_mask_decisions(p, r, ref.fp64);
          check_nan_rows(p, r, ref.fp64);
          if (row.expect_stats) {
            const Stats& s = stats;
            SCOPED_TRACE("stats: skipped " + std::to_string(s.tiles_skipped) + ", full " +
                         std::to_string(s.tiles_full) + ", mixed " +
                         std::to_string(s.tiles_mixed));
            row.expect_stats(s);
          }
        }
      }
      ++tally.rows[label];
      if (failed_parts() > failures_before) ++tally.failed[label];
      ErrorLog::instance().count_case();
    }
  }
};

// ---------------------------------------------------------------------------------------------
// 1. The contract's "Edge cases that must work"
// ---------------------------------------------------------------------------------------------

std::vector<ConformanceRow> edge_case_rows() {
  std::vector<ConformanceRow> rows = {
      // ---- empty and degenerate shapes
      {"lk0", "Lk = 0: every row fully masked; zero policy gives O = 0, lse = -inf",
       [](Problem& p, Rng&) { p.dims(2, 2, 1, 5, 0, 8, 8); }},
      {"lk0_nan", "Lk = 0 under the nan policy: O NaN, lse -inf",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 2, 3, 0, 8, 4);
         p.policy = FullyMasked::nan;
       }},
      {"lk0_uniform", "Lk = 0 under the uniform policy: nothing to average, O = 0",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 2, 3, 0, 8, 4);
         p.policy = FullyMasked::uniform;
       }},
      {"lq0", "Lq = 0: nothing to compute, no crash",
       [](Problem& p, Rng&) { p.dims(2, 2, 2, 0, 9, 8, 8); }},
      {"lq0_lk0", "Lq = 0 and Lk = 0 together",
       [](Problem& p, Rng&) { p.dims(1, 1, 1, 0, 0, 4, 4); }},
      {"d0", "D = 0: every score 0, scale defaults to 1 (not 1/sqrt(0)), uniform weights",
       [](Problem& p, Rng&) { p.dims(2, 2, 1, 6, 9, 0, 5); }},
      {"d0_causal_keylen", "D = 0 with causal and key lengths: uniform over the allowed keys",
       [](Problem& p, Rng&) {
         p.dims(2, 1, 1, 7, 11, 0, 3);
         p.causal = true;
         p.key_lengths = lengths({11, 4});
       }},
      {"d0_dv0", "D = 0 and Dv = 0: empty output rows, lse still log(n)",
       [](Problem& p, Rng&) { p.dims(1, 2, 2, 4, 6, 0, 0); }},
      {"d0_dv0_keylen", "D = 0 and Dv = 0 with causal and key lengths over 41 keys (a partial last key group)",
       [](Problem& p, Rng&) {
         p.dims(1, 3, 1, 4, 41, 0, 0);
         p.causal = true;
         p.key_lengths = lengths({23});
       }},
      {"d0_dv19_mask", "D = 0, Dv = 19 with causal, key lengths and a random mask over 41 keys (no K buffer)",
       [](Problem& p, Rng& rng) {
         p.dims(1, 3, 1, 4, 41, 0, 19);
         p.causal = true;
         p.key_lengths = lengths({30});
         random_fill(p.full_allowed(1), rng, 0.6);
       }},
      {"dv_lt_d", "Dv != D (Dv < D, odd sizes)",
       [](Problem& p, Rng&) { p.dims(2, 2, 2, 13, 21, 40, 7); }},
      {"dv_gt_d", "Dv != D (Dv > D, crossing several vectors)",
       [](Problem& p, Rng&) {
         p.dims(1, 3, 1, 10, 19, 3, 41);
         p.causal = true;
       }},
      {"b0", "B = 0: nothing to compute",
       [](Problem& p, Rng&) { p.dims(0, 2, 2, 4, 9, 8, 8); }},
      {"h0", "Hq = Hkv = 0: nothing to compute",
       [](Problem& p, Rng&) { p.dims(2, 0, 0, 4, 9, 8, 8); }},
      {"hq0_hkv1", "Hq = 0 with one kv head: nothing to compute",
       [](Problem& p, Rng&) { p.dims(1, 0, 1, 4, 9, 8, 8); }},
      // ---- Lq != Lk, both alignments
      {"lq_lt_lk_causal_bottom_right", "Lq < Lk, causal bottom-right: d(i) = i + Lk - Lq",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 37, 100, 16, 16);
         p.causal = true;
       }},
      {"lq_lt_lk_causal_top_left", "Lq < Lk, causal top-left: d(i) = i (PyTorch is_causal)",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 37, 100, 16, 16);
         p.causal = true;
         p.align = Align::top_left;
       }},
      {"lq_gt_lk_causal_bottom_right", "Lq > Lk, causal bottom-right: leading rows fully masked",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 2, 100, 37, 16, 16);
         p.causal = true;
       }},
      {"lq_gt_lk_causal_top_left", "Lq > Lk, causal top-left: late rows see every key",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 2, 100, 37, 16, 16);
         p.causal = true;
         p.align = Align::top_left;
       }},
      {"lq_ne_lk_window_top_left", "Lq != Lk, window top-left: the window follows d(i) = i",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 50, 90, 8, 8);
         p.window = {5, 3};
         p.align = Align::top_left;
       }},
      {"lq_ne_lk_window_bottom_right_lengths",
       "Lq != Lk, window bottom-right uses the valid lengths of each batch",
       [](Problem& p, Rng&) {
         p.dims(2, 1, 1, 50, 90, 8, 8);
         p.window = {5, 3};
         p.key_lengths = lengths({90, 61});
         p.query_lengths = lengths({50, 20});
       }},
      // ---- decode
      {"decode_bottom_right", "decode Lq = 1, Lk = 4099, causal bottom-right: sees all valid keys",
       [](Problem& p, Rng&) {
         p.dims(2, 4, 1, 1, 4099, 32, 32);
         p.causal = true;
         p.key_lengths = lengths({4099, 3001});
       }},
      {"decode_top_left", "decode Lq = 1, Lk = 4099, causal top-left: sees key 0 only",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 2, 1, 4099, 32, 32);
         p.causal = true;
         p.align = Align::top_left;
       }},
      {"decode_window_bottom_right", "decode over a long cache with a sliding window of 256",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 1, 4099, 16, 16);
         p.causal = true;
         p.window = {255, 0};
       }},
      {"decode_window_top_left", "decode, top-left window (0, 100): keys 0..100",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 1, 4099, 16, 16);
         p.window = {0, 100};
         p.align = Align::top_left;
       }},
      // ---- windows
      {"window_0_0", "window (0, 0): each row attends its diagonal key only",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 2, 40, 40, 8, 8);
         p.window = {0, 0};
       }},
      {"window_0_unbounded_right", "window (0, -1), not causal: keys j >= d(i)",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 70, 70, 8, 8);
         p.window = {0, -1};
       }},
      {"window_0_causal_lq_lt_lk", "window (0, 0) with Lq < Lk bottom-right",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 9, 70, 8, 8);
         p.causal = true;
         p.window = {0, 0};
       }},
      {"window_larger_than_lk", "window (500, 500) > Lk: same as no window",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 30, 50, 8, 8);
         p.window = {500, 500};
       }},
      {"window_larger_than_lk_causal", "causal + window (1000, -1) > Lk: plain causal",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 70, 70, 8, 8);
         p.causal = true;
         p.window = {1000, -1};
       }},
      // ---- lengths 0 and full
      {"lengths_0_and_full", "key/query lengths 0 (fully masked rows) and full (no padding)",
       [](Problem& p, Rng&) {
         p.dims(4, 2, 1, 20, 30, 8, 8);
         p.key_lengths = lengths({0, 30, 30, 7});
         p.query_lengths = lengths({20, 0, 20, 13});
       }},
      {"lengths_0_and_full_causal", "lengths 0 / full with causal bottom-right on valid lengths",
       [](Problem& p, Rng&) {
         p.dims(3, 1, 1, 20, 30, 8, 8);
         p.causal = true;
         p.key_lengths = lengths({30, 0, 11});
         p.query_lengths = lengths({20, 20, 0});
       }},
      {"lengths_0_uniform", "key length 0 under the uniform policy: mean of V over all Lk keys",
       [](Problem& p, Rng&) {
         p.dims(2, 2, 1, 6, 30, 8, 8);
         p.key_lengths = lengths({0, 30});
         p.policy = FullyMasked::uniform;
       }},
      // ---- biases
      {"bias_neg_inf", "-inf bias masks its pair; a row of -inf is fully masked",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 12, 40, 8, 8);
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = rng.bernoulli(0.3) ? -kInf : rng.uniform(-1.0f, 1.0f);
         for (int64_t j = 0; j < p.Lk; ++j) m.at(0, 1, 5, j) = -kInf;
       }},
      {"bias_neg_inf_broadcast_nan_policy", "-inf key bias [1,1,1,Lk] under the nan policy",
       [](Problem& p, Rng&) {
         p.dims(2, 2, 2, 9, 20, 8, 8);
         p.bias = MaskBuffer<float>::dense({2, 1, 1, 20}, 0.0f);
         for (int64_t j = 0; j < 20; ++j) p.bias.at(0, 0, 0, j) = -kInf;  // batch 0: all masked
         for (int64_t j = 0; j < 20; j += 3) p.bias.at(1, 0, 0, j) = -kInf;
         p.policy = FullyMasked::nan;
       }},
      {"bias_minus_1e4_some", "-1e4 is not a mask: its weight underflows to 0 next to O(1) keys",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 12, 40, 8, 8);
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = rng.bernoulli(0.4) ? -1e4f : rng.uniform(-1.0f, 1.0f);
         p.exact_zero_pattern = false;  // allowed weights e^-1e4 are 0
       }},
      {"bias_minus_1e4_whole_rows", "rows where every key has -1e4 (+ small noise): softmax as usual",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 12, 40, 8, 8);
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = -1e4f + rng.uniform(-1.0f, 1.0f);
         p.unit_scale = false;  // logits near -1e4 round by ~5e-4 in every fp32 implementation
       }},
      // docs/semantics.md's caveat: floats near 1e9 are 64 apart, so s + (-1e9) rounds s away and
      // every fp32 implementation gives uniform weights, while fp64 keeps a softmax of s. The
      // policy (<= 2x the naive fp32 error) is what applies, not exactness.
      {"bias_minus_1e9_whole_rows",
       "every key -1e9: uniform in fp32 (s rounds away); within 2x naive fp32 of fp64",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 12, 40, 8, 8);
         p.full_bias(-1e9f);
         p.unit_scale = false;
       }},
      {"bias_minus_1e9_some", "-1e9 next to O(1) keys: weight 0, not a mask; no rows fully masked",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 2, 12, 40, 8, 8);
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = rng.bernoulli(0.5) ? -1e9f : 0.0f;
         for (int64_t j = 0; j < p.Lk; ++j) m.at(0, 0, 3, j) = -1e9f;  // a whole row too
         p.exact_zero_pattern = false;
         p.unit_scale = false;
       }},
      {"bias_minus_3_4e38_whole_rows",
       "every key -3.4e38 (near FLT_MAX): no overflow to -inf/NaN, uniform weights",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 12, 40, 8, 8);
         p.full_bias(-kBig);
         p.unit_scale = false;
       }},
      {"bias_minus_3_4e38_some", "-3.4e38 next to O(1) keys: weight 0, never NaN, never a mask",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 12, 70, 8, 8);
         p.causal = true;
         p.alibi = alibi_slopes(2);
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = rng.bernoulli(0.5) ? -kBig : rng.uniform(-1.0f, 1.0f);
         for (int64_t j = 0; j < p.Lk; ++j) m.at(0, 1, 11, j) = -kBig;
         p.exact_zero_pattern = false;
         p.unit_scale = false;
       }},
      {"bias_pos_inf", "+inf bias on an attended pair: that row is NaN, others unaffected",
       [](Problem& p, Rng& rng) {
         p.dims(2, 2, 1, 10, 30, 8, 8);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         p.bias.at(0, 1, 4, 17) = kInf;
         p.bias.at(1, 0, 9, 0) = kInf;
         p.nan_rows = {{0, 1, 4}, {1, 0, 9}};
       }},
      {"bias_pos_inf_masked_pair", "+inf bias on a pair causal masks: ignored, row finite",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 10, 10, 8, 8);
         p.causal = true;
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         p.bias.at(0, 0, 2, 7) = kInf;  // j > i: masked
       }},
      {"bias_nan", "NaN bias on an attended pair: that row is NaN (NaN is never a mask)",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 2, 10, 70, 8, 8);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         p.bias.at(0, 0, 3, 66) = kNaN;
         p.bias.at(0, 1, 0, 0) = kNaN;
         p.nan_rows = {{0, 0, 3}, {0, 1, 0}};
       }},
      {"bias_nan_masked_pair", "NaN bias on a pair allowed = 0 masks: ignored, row finite",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 10, 70, 8, 8);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         p.full_allowed(1);
         p.allowed.at(0, 0, 3, 66) = 0;
         p.bias.at(0, 0, 3, 66) = kNaN;
       }},
      {"bias_neg_inf_row_uniform_policy", "a row fully masked by -inf bias follows the uniform policy",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 9, 70, 8, 8);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         for (int64_t j = 0; j < p.Lk; ++j) p.bias.at(0, 0, 4, j) = -kInf;
         p.policy = FullyMasked::uniform;
       }},
      {"bias_neg_inf_on_window_keys", "-inf on every key a window allows (finite elsewhere): fully masked",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 70, 70, 8, 8);
         p.causal = true;
         p.window = {3, 0};
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         for (int64_t j = 62; j <= 66; ++j) p.bias.at(0, 0, 66, j) = -kInf;  // keys 63..66
         for (int64_t j = 0; j <= 1; ++j) p.bias.at(0, 0, 1, j) = -kInf;      // keys 0..1
       }},
      {"first_tile_closed_for_most_rows", "-inf on tile 0 for all rows but one: running max stays -inf, then recovers",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 24, 200, 8, 8);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         for (int64_t i = 1; i < p.Lq; ++i)
           for (int64_t j = 0; j < 64; ++j) p.bias.at(0, 0, i, j) = -kInf;
       }},
      {"first_tile_minus_3_4e38_then_normal", "a first tile of -3.4e38 logits, O(1) later: online rescale, no NaN",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 24, 200, 8, 8);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         for (int64_t i = 0; i < p.Lq; ++i)
           for (int64_t j = 0; j < 64; ++j) p.bias.at(0, 0, i, j) = -kBig;
         p.exact_zero_pattern = false;
         p.unit_scale = false;
       }},
      {"nan_in_query_row", "NaN in one attended query row: that row NaN (data NaN is never a mask)",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 10, 70, 8, 8);
         p.causal = true;
         p.tweak = [](CaseInputs& in) { in.q.at(0, 1, 7, 2) = kNaN; };
         p.nan_rows = {{0, 1, 7}};
       }},
      {"nan_in_attended_key", "NaN in K of key 5: every row attending it is NaN, the others not",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 10, 10, 8, 8);
         p.causal = true;
         p.align = Align::top_left;
         p.tweak = [](CaseInputs& in) { in.k.at(0, 0, 5, 0) = kNaN; };
         p.nan_rows = {{0, 0, 5}, {0, 0, 6}, {0, 0, 7}, {0, 0, 8}, {0, 0, 9}};
       }},
      {"nan_in_only_allowed_key", "NaN in K of the only key a row attends: row NaN, lse NaN (not -inf)",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 1, 40, 4, 4);
         p.causal = true;
         p.align = Align::top_left;  // Lq = 1: d(0) = 0, key 0 only
         p.tweak = [](CaseInputs& in) { in.k.at(0, 0, 0, 0) = kNaN; };
         p.nan_rows = {{0, 0, 0}};
       }},
      {"nan_key_alone_in_masked_tile", "NaN in K of key 0, keys 1..63 masked, 64..127 allowed: NaN not hidden",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 4, 128, 4, 4);
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 128}, 1);
         for (int64_t j = 1; j < 64; ++j) p.allowed.at(0, 0, 0, j) = 0;
         p.tweak = [](CaseInputs& in) { in.k.at(0, 0, 0, 0) = kNaN; };
         p.nan_rows = {{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {0, 0, 3}};
       }},
      {"nan_bias_alone_in_masked_tile", "NaN bias on key 0, keys 1..63 masked, later tiles allowed: row NaN",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 4, 128, 4, 4);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 128}, 1);
         for (int64_t j = 1; j < 64; ++j) p.allowed.at(0, 0, 0, j) = 0;
         p.bias.at(0, 0, 2, 0) = kNaN;
         p.nan_rows = {{0, 0, 2}};
       }},
      {"pos_inf_bias_alone_in_masked_tile", "+inf bias on key 0, keys 1..63 masked, later tiles allowed: row NaN",
       [](Problem& p, Rng& rng) {
         p.dims(1, 1, 1, 4, 128, 4, 4);
         random_fill(p.full_bias(), rng, -1.0f, 1.0f);
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 128}, 1);
         for (int64_t j = 1; j < 64; ++j) p.allowed.at(0, 0, 0, j) = 0;
         p.bias.at(0, 0, 1, 0) = kInf;
         p.nan_rows = {{0, 0, 1}};
       }},
      {"many_queries_one_key", "Lq = 4099 over Lk = 1, causal bottom-right, nan policy: only the last row attends",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 4099, 1, 8, 8);
         p.causal = true;
         p.policy = FullyMasked::nan;
       }},
      {"nan_in_attended_value", "NaN in V of key 5: NaN in that O column of the rows attending it",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 10, 10, 8, 8);
         p.causal = true;
         p.tweak = [](CaseInputs& in) { in.v.at(0, 0, 5, 3) = kNaN; };
         p.others_finite = false;  // compared with the reference element by element
       }},
      {"query_lengths_gt_key_lengths_causal", "valid qlen > klen bottom-right: d(i) < 0 rows fully masked",
       [](Problem& p, Rng&) {
         p.dims(2, 1, 1, 40, 40, 8, 8);
         p.causal = true;
         p.key_lengths = lengths({10, 40});
         p.query_lengths = lengths({30, 35});
       }},
      {"query_lengths_only_causal", "query lengths alone move the bottom-right diagonal: d(i) = i + Lk - qlen",
       [](Problem& p, Rng&) {
         p.dims(2, 2, 1, 33, 33, 8, 8);
         p.causal = true;
         p.query_lengths = lengths({20, 33});
       }},
      {"segment_absent_from_keys", "a query segment id no key has: that row fully masked",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 20, 70, 8, 8);
         p.query_segments.assign(20, 0);
         p.key_segments.assign(70, 0);
         p.query_segments[4] = 7;
         p.query_segments[19] = 7;
       }},
      {"window_left_unbounded_right0", "window (-1, 0) without causal: same pairs as causal",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 70, 90, 8, 8);
         p.window = {-1, 0};
       }},
      {"head_dim_257_misaligned", "D = 257, Dv = 255 in misaligned padded storage",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 17, 33, 257, 255);
         p.storage(Storage::padded_bhld);
         p.causal = true;
       }},
      {"decode_single_allowed_key_far", "decode over 4099 keys with one allowed key (j = 4000)",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 1, 4099, 16, 16);
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 4099}, 0);
         p.allowed.at(0, 0, 0, 4000) = 1;
       }},
      // ---- very large logits
      {"large_logits_exact", "|s| ~ 1e4 with exactly representable logits: max-subtraction, no overflow",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 33, 40, 4, 8);
         p.scale = 1.0f;
         p.causal = true;
         p.unit_scale = false;
         p.exact_zero_pattern = false;
         // Integer Q in [-100, 100], K in [-25, 25]: products and sums exact in fp32.
         auto ints = std::make_shared<std::vector<float>>();
         for (int n = 0; n < 2 * 33 * 4 + 40 * 4; ++n)
           ints->push_back(static_cast<float>(rng.uniform_int(-25, 25)));
         p.tweak = [ints](CaseInputs& in) {
           size_t n = 0;
           for (int64_t h = 0; h < 2; ++h)
             for (int64_t i = 0; i < 33; ++i)
               for (int64_t d = 0; d < 4; ++d) in.q.at(0, h, i, d) = 4.0f * (*ints)[n++];
           for (int64_t j = 0; j < 40; ++j)
             for (int64_t d = 0; d < 4; ++d) in.k.at(0, 0, j, d) = (*ints)[n++];
         };
       }},
      {"large_logits_random", "random |s| up to ~1e4, both signs: finite, softmax of the max",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 33, 40, 64, 16);
         p.lo = -30.0f;
         p.hi = 30.0f;
         p.scale = 1.0f;
         p.unit_scale = false;
         p.exact_zero_pattern = false;
         p.floor = 4e-3;  // ulp(1e4) ~ 1e-3 of logit rounding in any fp32 dot product
       }},
      {"softcap_large_logits", "softcap 20 on |s| ~ 1e4: tanh saturates to +-20, no NaN",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 33, 70, 64, 16);
         p.lo = -30.0f;
         p.hi = 30.0f;
         p.scale = 1.0f;
         p.softcap = 20.0f;
         p.causal = true;
         p.unit_scale = false;
         p.floor = 1e-5;
       }},
      // ---- scale
      {"scale_zero", "scale 0: every score 0, uniform weights over allowed keys",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 20, 30, 16, 16);
         p.scale = 0.0f;
         p.causal = true;
       }},
      {"scale_negative", "negative scale: prefers the least similar keys, still a softmax",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 20, 30, 16, 16);
         p.scale = -0.7f;
         p.key_lengths = lengths({23});
       }},
  };
  // ---- lengths around every SIMD width and tile size
  for (int64_t L : kLengths) {
    const std::string l = std::to_string(L);
    rows.push_back({"len" + l + "_causal_padded",
                    "Lq = Lk = D = " + l + ", causal with key/query padding: lane and tile tails",
                    [L](Problem& p, Rng&) {
                      p.dims(2, 2, 1, L, L, L, L);
                      p.causal = true;
                      p.key_lengths = lengths({L, L / 2});
                      p.query_lengths = lengths({std::max<int64_t>(L - 1, 1), L});
                    }});
    rows.push_back({"len" + l + "_keys_elementwise",
                    "Lk = " + l + " keys with allowed + bias (-inf) element-wise, Dv = 3",
                    [L](Problem& p, Rng& rng) {
                      p.dims(1, 2, 2, 7, L, 24, 3);
                      p.storage(Storage::blhd);
                      random_fill(p.full_allowed(), rng, 0.7);
                      MaskBuffer<float>& m = p.full_bias();
                      for (float& x : m.data)
                        x = rng.bernoulli(0.1) ? -kInf : rng.uniform(-1.0f, 1.0f);
                    }});
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 2. Interactions
// ---------------------------------------------------------------------------------------------

// Every rule in one call: lengths, causal, window, prefix, segments, allowed, bias, ALiBi,
// softcap, GQA.
void all_rules(Problem& p, Rng& rng, FullyMasked policy) {
  p.dims(2, 4, 2, 70, 150, 24, 20);
  p.causal = true;
  p.window = {40, 5};
  p.prefix = 10;
  p.key_lengths = lengths({150, 97});
  p.query_lengths = lengths({70, 41});
  p.query_segments.resize(2 * 70);
  p.key_segments.resize(2 * 150);
  for (int64_t b = 0; b < 2; ++b) {
    // Bottom-right: query i sits at key position i + (klen - qlen); documents of 45 keys.
    const int64_t klen = b == 0 ? 150 : 97, qlen = b == 0 ? 70 : 41;
    for (int64_t j = 0; j < 150; ++j) p.key_segments[b * 150 + j] = static_cast<int32_t>(j / 45);
    for (int64_t i = 0; i < 70; ++i)
      p.query_segments[b * 70 + i] = static_cast<int32_t>((i + klen - qlen) / 45);
  }
  random_fill(p.full_allowed(), rng, 0.85);
  MaskBuffer<float>& m = p.full_bias();
  for (float& x : m.data) x = rng.bernoulli(0.05) ? -kInf : rng.uniform(-1.0f, 1.0f);
  p.alibi = alibi_slopes(4);
  p.softcap = 5.0f;
  p.policy = policy;
}

std::vector<ConformanceRow> interaction_rows() {
  std::vector<ConformanceRow> rows = {
      {"all_rules_zero", "all rules combined (AND), GQA 4/2, zero policy",
       [](Problem& p, Rng& rng) { all_rules(p, rng, FullyMasked::zero); }},
      {"all_rules_nan", "all rules combined, nan policy for the fully masked rows",
       [](Problem& p, Rng& rng) { all_rules(p, rng, FullyMasked::nan); }},
      {"all_rules_uniform", "all rules combined, uniform policy for the fully masked rows",
       [](Problem& p, Rng& rng) { all_rules(p, rng, FullyMasked::uniform); }},
      {"all_rules_top_left_blhd", "all rules combined, top-left diagonal, blhd layout",
       [](Problem& p, Rng& rng) {
         all_rules(p, rng, FullyMasked::zero);
         p.align = Align::top_left;
         p.storage(Storage::blhd);
       }},
      {"first_tile_masked_window", "window far from the start: first key tiles masked, later not",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 200, 200, 16, 16);
         p.causal = true;
         p.window = {20, 0};
       }},
      {"first_tile_masked_allowed", "allowed = 0 for j < 64: the first key tile is all masked",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 50, 200, 16, 16);
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 200}, 1);
         for (int64_t j = 0; j < 64; ++j) p.allowed.at(0, 0, 0, j) = 0;
       }},
      {"first_tiles_masked_late_window", "Lq 20 < Lk 200 bottom-right, window (5, 0): tiles 0-1 masked",
       [](Problem& p, Rng&) {
         p.dims(2, 1, 1, 20, 200, 16, 16);
         p.window = {5, 0};
         p.key_lengths = lengths({200, 190});
       }},
      {"middle_tile_masked_allowed", "allowed = 0 for 64 <= j < 128 with Lk = 200: masked middle tile",
       [](Problem& p, Rng&) {
         p.dims(2, 2, 1, 50, 200, 16, 16);
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 200}, 1);
         for (int64_t j = 64; j < 128; ++j) p.allowed.at(0, 0, 0, j) = 0;
       }},
      {"middle_tile_masked_bias", "bias -inf for 64 <= j < 128 (per row), causal: masked middle tile",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 200, 200, 16, 16);
         p.causal = true;
         p.bias = MaskBuffer<float>::dense({1, 1, 200, 200}, 0.0f);
         for (int64_t i = 0; i < 200; ++i)
           for (int64_t j = 64; j < 128; ++j) p.bias.at(0, 0, i, j) = -kInf;
       }},
      {"middle_tile_masked_garbage", "NaN in K and V of masked keys (middle tile, padding) never leaks",
       [](Problem& p, Rng&) {
         p.dims(2, 2, 1, 30, 200, 16, 16);
         p.key_lengths = lengths({200, 150});
         p.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 200}, 1);
         for (int64_t j = 64; j < 128; ++j) p.allowed.at(0, 0, 0, j) = 0;
         p.allowed.at(0, 0, 0, 3) = 0;
         p.tweak = [](CaseInputs& in) {
           for (int64_t b = 0; b < 2; ++b)
             for (int64_t j = 0; j < 200; ++j) {
               const bool masked = (j >= 64 && j < 128) || j == 3 || (b == 1 && j >= 150);
               if (!masked) continue;
               for (int64_t d = 0; d < 16; ++d) {
                 in.k.at(b, 0, j, d) = kNaN;
                 in.v.at(b, 0, j, d) = kNaN;
               }
             }
         };
       }},
  };
  for (FullyMasked policy : {FullyMasked::zero, FullyMasked::nan, FullyMasked::uniform}) {
    rows.push_back({std::string("lq_gt_lk_bottom_right_") + policy_name(policy),
                    std::string("Lq 100 > Lk 40 causal bottom-right: rows i < 60 fully masked, ") +
                        policy_name(policy) + " policy",
                    [policy](Problem& p, Rng&) {
                      p.dims(2, 2, 1, 100, 40, 16, 12);
                      p.causal = true;
                      p.policy = policy;
                    }});
  }
  std::vector<ConformanceRow> more = {
      {"alibi_6_heads", "ALiBi with 6 heads (non-power-of-two), slopes 2^(-8i/6), causal, GQA 6/2",
       [](Problem& p, Rng&) {
         p.dims(1, 6, 2, 100, 100, 16, 16);
         p.causal = true;
         p.alibi = alibi_slopes(6);
       }},
      {"alibi_6_heads_lq_ne_lk", "ALiBi |d(i) - j| both sides of the diagonal, Lq != Lk, lengths",
       [](Problem& p, Rng&) {
         p.dims(2, 6, 3, 20, 90, 16, 16);
         p.alibi = alibi_slopes(6);
         p.key_lengths = lengths({90, 47});
         p.query_lengths = lengths({20, 11});
       }},
      {"alibi_6_heads_top_left", "ALiBi with the top-left diagonal d(i) = i",
       [](Problem& p, Rng&) {
         p.dims(1, 6, 1, 20, 90, 16, 16);
         p.alibi = alibi_slopes(6);
         p.align = Align::top_left;
       }},
      {"packed_segments_causal", "segments_from_lengths({40, 70, 25}, 150) + causal: documents apart",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 150, 150, 16, 16);
         p.causal = true;
         p.query_segments = p.key_segments = maskattn::segments_from_lengths({40, 70, 25}, 150);
       }},
      {"packed_segments_causal_tail_masked",
       "packed documents + causal + lengths 135: the -1 tail attends nothing",
       [](Problem& p, Rng&) {
         p.dims(2, 2, 2, 150, 150, 16, 16);
         p.causal = true;
         std::vector<int32_t> a = maskattn::segments_from_lengths({40, 70, 25}, 150);
         std::vector<int32_t> b = maskattn::segments_from_lengths({64, 1, 64, 17}, 150);
         a.insert(a.end(), b.begin(), b.end());
         p.query_segments = p.key_segments = a;
         p.key_lengths = p.query_lengths = lengths({135, 146});
       }},
      {"prefix_window", "prefix 16 + window (8, 0), not causal: prefix widens the window",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 100, 100, 16, 16);
         p.window = {8, 0};
         p.prefix = 16;
       }},
      {"prefix_window_causal", "prefix 16 + causal + window (8, 2)",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 100, 100, 16, 16);
         p.causal = true;
         p.window = {8, 2};
         p.prefix = 16;
       }},
      {"prefix_window_across_tiles", "prefix 70 (crosses a tile) + window (10, 0), bottom-right Lq < Lk",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 150, 200, 16, 16);
         p.window = {10, 0};
         p.prefix = 70;
       }},
      {"prefix_without_causal_is_noop", "prefix alone restricts nothing (only widens causal/window)",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 30, 40, 8, 8);
         p.prefix = 10;
         p.key_lengths = lengths({33});
       }},
      {"prefix_beyond_key_length", "prefix 50 > key length 20: the prefix is clipped by lengths",
       [](Problem& p, Rng&) {
         p.dims(2, 1, 1, 30, 64, 8, 8);
         p.causal = true;
         p.prefix = 50;
         p.key_lengths = lengths({20, 64});
       }},
      {"prefix_segments_allowed", "prefix keys still obey segments and allowed",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 80, 80, 8, 8);
         p.causal = true;
         p.prefix = 30;
         p.query_segments = p.key_segments = maskattn::segments_from_lengths({20, 60}, 80);
         random_fill(p.full_allowed(), rng, 0.8);
       }},
      {"gqa_mqa_bottom_right_lengths", "MQA 8/1 with Lq != Lk bottom-right and per-batch lengths",
       [](Problem& p, Rng&) {
         p.dims(2, 8, 1, 33, 65, 16, 16);
         p.causal = true;
         p.key_lengths = lengths({65, 40});
         p.query_lengths = lengths({33, 7});
       }},
      {"sinks_fully_masked_rows_nan_policy", "learned sinks: a row with no key gives O = 0 and lse = the sink even "
       "under the nan policy; a head with sink -inf keeps the policy",
       [](Problem& p, Rng&) {
         p.dims(2, 3, 1, 9, 30, 16, 16);
         p.causal = true;
         p.key_lengths = lengths({30, 0});
         p.query_lengths = lengths({5, 9});
         p.policy = FullyMasked::nan;
         p.sinks = {0.5f, -kInf, 4.0f};
       }},
      {"sinks_dominant_with_alibi_softcap", "a sink far above the logits takes most of the weight; ALiBi and "
       "softcap act on the keys' logits only",
       [](Problem& p, Rng&) {
         p.dims(1, 4, 2, 20, 70, 16, 16);
         p.causal = true;
         p.alibi = alibi_slopes(4);
         p.softcap = 3.0f;
         p.sinks = {6.0f, -6.0f, 0.0f, 12.0f};
       }},
      {"tree_medusa_16_gqa", "tree verification: 16 nodes over 300 keys, each node sees the keys before the tree, "
       "its ancestors and itself (GQA 8/2, causal)",
       [](Problem& p, Rng&) {
         p.dims(1, 8, 2, 16, 300, 32, 32);
         p.causal = true;
         p.tree = {-1, 0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 13};
       }},
      {"tree_per_sequence_with_padding", "one tree per sequence, ragged key lengths (the tree is the last Lq keys "
       "of each), not causal, bias on top",
       [](Problem& p, Rng& rng) {
         p.dims(2, 2, 2, 6, 40, 16, 16);
         p.key_lengths = lengths({40, 17});
         p.tree = {-1, 0, 1, 1, -1, 4, -1, -1, 1, 0, 3, 2};
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = rng.bernoulli(0.1) ? -kInf : rng.uniform(-1.0f, 1.0f);
       }},
      {"softcap_alibi_bias_order", "softcap before ALiBi and bias: -inf bias stays a mask",
       [](Problem& p, Rng& rng) {
         p.dims(1, 2, 1, 40, 40, 16, 16);
         p.lo = -3.0f;
         p.hi = 3.0f;
         p.softcap = 2.0f;
         p.alibi = alibi_slopes(2);
         MaskBuffer<float>& m = p.full_bias();
         for (float& x : m.data) x = rng.bernoulli(0.2) ? -kInf : rng.uniform(-2.0f, 2.0f);
         p.unit_scale = false;
       }},
  };
  rows.insert(rows.end(), more.begin(), more.end());
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 3. Mask decisions: dense element-wise rules at awkward sizes; small logits, so every allowed
// weight is far from underflow and weight == 0 <=> masked must hold exactly on every target.
// ---------------------------------------------------------------------------------------------

std::vector<ConformanceRow> mask_decision_rows() {
  std::vector<ConformanceRow> rows;
  const std::array<int64_t, 3> shapes[] = {{17, 129, 3}, {65, 64, 0}, {33, 200, 1}, {129, 65, 2},
                                           {5, 257, 0}};
  for (const auto& [lq, lk, variant] : shapes) {
    const std::string n = "lq" + std::to_string(lq) + "_lk" + std::to_string(lk);
    rows.push_back({n + "_allowed_sparse", "random allowed (p = 0.1): exact zero pattern",
                    [lq = lq, lk = lk](Problem& p, Rng& rng) {
                      p.dims(2, 2, 1, lq, lk, 16, 8);
                      random_fill(p.full_allowed(), rng, 0.1);
                    }});
    rows.push_back({n + "_allowed_dense_bias_inf", "allowed p = 0.9 and -inf bias p = 0.1 together",
                    [lq = lq, lk = lk](Problem& p, Rng& rng) {
                      p.dims(1, 2, 2, lq, lk, 16, 8);
                      random_fill(p.full_allowed(), rng, 0.9);
                      MaskBuffer<float>& m = p.full_bias();
                      for (float& x : m.data)
                        x = rng.bernoulli(0.1) ? -kInf : rng.uniform(-0.5f, 0.5f);
                    }});
    rows.push_back({n + "_segments_random_window",
                    "random (non-contiguous) segment ids + window + key lengths",
                    [lq = lq, lk = lk, variant = variant](Problem& p, Rng& rng) {
                      p.dims(2, 1, 1, lq, lk, 16, 8);
                      p.query_segments.resize(static_cast<size_t>(2 * lq));
                      p.key_segments.resize(static_cast<size_t>(2 * lk));
                      for (int32_t& s : p.query_segments) s = int32_t(rng.uniform_int(0, 2));
                      for (int32_t& s : p.key_segments) s = int32_t(rng.uniform_int(0, 2));
                      p.window = {17 + variant * 20, 3 * variant};
                      p.key_lengths = lengths({lk, lk - 1 - variant});
                      p.align = variant % 2 ? Align::top_left : Align::bottom_right;
                    }});
  }
  rows.push_back({"broadcast_allowed_per_head", "allowed [1, Hq, 1, Lk] broadcasts over B and Lq",
                  [](Problem& p, Rng& rng) {
                    p.dims(3, 4, 2, 21, 70, 16, 8);
                    p.allowed = MaskBuffer<uint8_t>::dense({1, 4, 1, 70}, 1);
                    random_fill(p.allowed, rng, 0.5);
                    p.causal = true;
                  }});
  rows.push_back({"broadcast_bias_per_query", "bias [B, 1, Lq, 1] (-inf rows) broadcasts over keys",
                  [](Problem& p, Rng& rng) {
                    p.dims(2, 2, 1, 21, 70, 16, 8);
                    p.bias = MaskBuffer<float>::dense({2, 1, 21, 1}, 0.0f);
                    for (float& x : p.bias.data)
                      x = rng.bernoulli(0.3) ? -kInf : rng.uniform(-1.0f, 1.0f);
                  }});
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 4. Work skipping (Options::stats). Only inequalities that hold for any query block size and any
// key tile up to ~100 keys (targets differ, and tile shapes are tuned) are asserted.
// ---------------------------------------------------------------------------------------------

double fraction(int64_t part, const Stats& s) {
  const int64_t total = s.tiles_skipped + s.tiles_full + s.tiles_mixed;
  return total > 0 ? static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

std::vector<ConformanceRow> work_skipping_rows() {
  return {
      {"causal_1x2x1024x64", "causal: about half of the tiles skipped, few mixed (diagonal only)",
       [](Problem& p, Rng&) {
         p.dims(1, 2, 1, 1024, 1024, 64, 64);
         p.causal = true;
         p.want_weights = false;
         p.fp32_orders = 1;
       },
       [](const Stats& s) {
         EXPECT_GT(s.tiles_full, 0);
         EXPECT_GE(fraction(s.tiles_skipped, s), 0.35);
         EXPECT_LE(fraction(s.tiles_skipped, s), 0.65);
         EXPECT_LT(fraction(s.tiles_mixed, s), 0.15);
       }},
      {"unmasked_1x1x256x1024", "no rule: nothing skipped; element-wise masking at most at the key tail",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 256, 1024, 64, 64);
         p.want_weights = false;
         p.fp32_orders = 1;
       },
       [](const Stats& s) {
         EXPECT_GT(s.tiles_full, 0);
         EXPECT_EQ(s.tiles_skipped, 0);
         // Every row covers every key: only a partial last key tile (when the tile does not
         // divide 1024, e.g. 60-key tiles) may be mixed, one per query block.
         EXPECT_LT(fraction(s.tiles_mixed, s), 0.15);
       }},
      {"padded_batch_keylen_quarter", "key lengths L/4 in a padded batch: >= 60% of tiles skipped",
       [](Problem& p, Rng&) {
         p.dims(2, 1, 1, 1024, 1024, 64, 64);
         p.key_lengths = lengths({256, 256});
         p.want_weights = false;
         p.fp32_orders = 1;
       },
       [](const Stats& s) {
         EXPECT_GT(s.tiles_full, 0);
         EXPECT_GE(fraction(s.tiles_skipped, s), 0.6);
       }},
      {"sliding_window_64_L1024", "sliding window of 64 keys on L = 1024: >= 80% of tiles skipped",
       [](Problem& p, Rng&) {
         p.dims(1, 1, 1, 1024, 1024, 64, 64);
         p.window = {63, 0};
         p.want_weights = false;
         p.fp32_orders = 1;
       },
       [](const Stats& s) { EXPECT_GE(fraction(s.tiles_skipped, s), 0.8); }},
  };
}

TEST_P(Conformance, EdgeCases) { run_rows(edge_case_rows()); }
TEST_P(Conformance, Interactions) { run_rows(interaction_rows()); }
TEST_P(Conformance, MaskDecisions) { run_rows(mask_decision_rows()); }
TEST_P(Conformance, WorkSkipping) { run_rows(work_skipping_rows()); }

MASKATTN_INSTANTIATE_FOR_TARGETS(Conformance);

}  // namespace
