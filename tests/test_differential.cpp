// Differential tests: every kernel target against the float64 reference (maskattn/reference.hpp),
// over shapes, layouts, every mask rule of Options and their combinations, the fully-masked-row
// policies, garbage in masked-out data, shift invariance, the optional outputs and the tile stats.
//
// Each TEST_P runs a table of cases (one row = one problem, with a comment saying why it is there)
// on one target; a failure names the row, the problem and the Rng seed. The error bound is the
// policy written at compare_to_reference in test_support.hpp.
#include <cstring>
#include <functional>

#include "test_support.hpp"

namespace {

using maskattn::Align;
using maskattn::FullyMasked;
using maskattn::Precision;
using maskattn::ReferenceResult;
using maskattn::Stats;
using maskattn::Window;
using namespace maskattn_test;

constexpr float kSentinel = kOutputSentinel;  // what AttentionCase fills output buffers with

// The contract's lengths: around every SIMD width (1, 4, 8, 16 lanes), query block and key tile.
const int64_t kLengths[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129};
// Odd head sizes (FlashAttention's 59, 111) and the common 128.
const int64_t kHeadDims[] = {1, 3, 17, 59, 111, 128};

// A problem is the suites' shared AttentionCase (attention_case.hpp): shapes, storage and the mask
// rules, owned by the case (Options only points into it).
using Case = AttentionCase;

template <class T>
std::string join(const std::vector<T>& v, size_t max_items = 8) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size() && i < max_items; ++i) os << (i ? "," : "") << +v[i];
  if (v.size() > max_items) os << ",...";
  os << "]";
  return os.str();
}

std::string describe(const Case& c) {
  std::ostringstream os;
  os << "B=" << c.B << " Hq=" << c.Hq << " Hkv=" << c.Hkv << " Lq=" << c.Lq << " Lk=" << c.Lk
     << " D=" << c.D << " Dv=" << c.Dv << " q/k/v/o=" << storage_name(c.q_storage) << "/"
     << storage_name(c.k_storage) << "/" << storage_name(c.v_storage) << "/"
     << storage_name(c.o_storage);
  if (c.scale) os << " scale=" << *c.scale;
  if (c.causal) os << " causal";
  if (c.causal || c.window.left >= 0 || c.window.right >= 0 || !c.alibi.empty())
    os << (c.align == Align::bottom_right ? " bottom_right" : " top_left");
  if (c.window.left >= 0 || c.window.right >= 0)
    os << " window=(" << c.window.left << "," << c.window.right << ")";
  if (c.prefix) os << " prefix=" << c.prefix;
  if (c.softcap) os << " softcap=" << c.softcap;
  if (!c.key_lengths.empty()) os << " key_lengths=" << join(c.key_lengths);
  if (!c.query_lengths.empty()) os << " query_lengths=" << join(c.query_lengths);
  if (!c.query_segments.empty()) os << " segments";
  if (!c.alibi.empty()) os << " alibi=" << join(c.alibi, 4);
  if (!c.sinks.empty()) os << " sinks=" << join(c.sinks, 4);
  if (!c.tree.empty()) os << " tree=" << join(c.tree, 16);
  if (c.rope)
    os << " rope(theta=" << c.rope->theta << " dims=" << c.rope->dims << " "
       << (c.rope->layout == maskattn::RopeLayout::halves ? "halves" : "interleaved") << " offset=" << c.rope->offset
       << ")";
  if (c.bias.present())
    os << " bias[" << c.bias.shape[0] << "," << c.bias.shape[1] << "," << c.bias.shape[2] << ","
       << c.bias.shape[3] << "]";
  if (c.allowed.present())
    os << " allowed[" << c.allowed.shape[0] << "," << c.allowed.shape[1] << ","
       << c.allowed.shape[2] << "," << c.allowed.shape[3] << "]";
  os << " policy="
     << (c.policy == FullyMasked::zero ? "zero" : c.policy == FullyMasked::nan ? "nan" : "uniform");
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Mask builders
// ---------------------------------------------------------------------------------------------

MaskBuffer<float> random_bias(Rng& rng, std::array<int64_t, 4> shape, float lo = -2.0f,
                            float hi = 2.0f) {
  MaskBuffer<float> m = MaskBuffer<float>::dense(shape, 0.0f);
  for (float& x : m.data) x = rng.uniform(lo, hi);
  return m;
}

MaskBuffer<uint8_t> random_allowed(Rng& rng, std::array<int64_t, 4> shape, double p_allowed) {
  MaskBuffer<uint8_t> m = MaskBuffer<uint8_t>::dense(shape, 0);
  for (uint8_t& x : m.data) x = rng.bernoulli(p_allowed) ? 1 : 0;
  return m;
}

// Packed documents: ids non-decreasing along the sequence, a new document with probability p.
std::vector<int32_t> packed_segments(Rng& rng, int64_t B, int64_t L, double p_new) {
  std::vector<int32_t> s(static_cast<size_t>(B * L));
  for (int64_t b = 0; b < B; ++b) {
    int32_t id = 0;
    for (int64_t i = 0; i < L; ++i) {
      if (i > 0 && rng.bernoulli(p_new)) ++id;
      s[static_cast<size_t>(b * L + i)] = id;
    }
  }
  return s;
}

std::vector<int32_t> random_segments(Rng& rng, int64_t B, int64_t L, int32_t ids) {
  std::vector<int32_t> s(static_cast<size_t>(B * L));
  for (int32_t& x : s) x = static_cast<int32_t>(rng.uniform_int(0, ids - 1));
  return s;
}

// ALiBi's geometric slopes 2^(-8 (h + 1) / H).
std::vector<float> alibi_slopes(int64_t H) {
  std::vector<float> s(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    s[static_cast<size_t>(h)] = std::pow(2.0f, -8.0f * static_cast<float>(h + 1) / H);
  return s;
}

std::vector<int32_t> lengths(std::initializer_list<int64_t> v) {
  std::vector<int32_t> r;
  for (int64_t x : v) r.push_back(static_cast<int32_t>(x));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Running the kernel and the reference
// ---------------------------------------------------------------------------------------------

// The kernel on one target and kernel, with the tile stats where a test asks for them.
CaseRun run_kernel(const Case& c, const CaseInputs& in, KernelTarget t, Stats* stats = nullptr) {
  maskattn::Options o = c.options(t.target, t.kernel);
  o.stats = stats;
  return expect_kernel_run(c, in, o);
}

// The fp64 reference and the naive fp32 one, its error the worst of three orders over D (natural,
// reversed, shuffled): a kernel that sums in another order (tiles, lanes, FMA) is then judged
// against a fair sample.
CaseReferences run_reference(const Case& c, const CaseInputs& in) {
  return expect_references(c, in, {DOrder::reversed, DOrder::shuffled});
}

std::vector<float> head(const std::vector<float>& v, size_t n) {
  return std::vector<float>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Buffer elements the output view does not address, and the canaries after weights / lse, still
// hold the sentinel.
void expect_untouched(const Case& c, const CaseRun& r) {
  const std::vector<uint8_t> addressed = r.out.addressed();
  int64_t touched = 0;
  for (size_t i = 0; i < r.out.buf.size(); ++i)
    if (!addressed[i] && !same_bits(r.out.buf[i], kSentinel)) ++touched;
  EXPECT_EQ(touched, 0) << "elements of the output buffer outside the output view were written ("
                        << storage_name(c.o_storage) << ")";
  const size_t nw = static_cast<size_t>(c.B * c.Hq * c.Lq * c.Lk);
  const size_t nl = static_cast<size_t>(c.B * c.Hq * c.Lq);
  for (size_t i = nw; i < r.weights.size(); ++i)
    EXPECT_TRUE(same_bits(r.weights[i], kSentinel)) << "weights written past weights_size at " << i;
  for (size_t i = nl; i < r.lse.size(); ++i)
    EXPECT_TRUE(same_bits(r.lse[i], kSentinel)) << "lse written past lse_size at " << i;
}

// The explicit per-policy promises for rows the reference flags as fully masked.
void expect_fully_masked_policy(const Case& c, const CaseInputs& clean, const CaseRun& r,
                                const std::vector<uint8_t>& fully_masked) {
  const std::vector<float> o = r.out.dense();
  const int64_t group = c.Hkv > 0 ? c.Hq / c.Hkv : 1;
  int64_t failures = 0;
  std::ostringstream msg;
  auto fail = [&](int64_t b, int64_t h, int64_t i, const std::string& what) {
    if (failures++ < 6) msg << "\n  row [" << b << "," << h << "," << i << "]: " << what;
  };
  const double mean_tol = std::max(2e-6, 2.0 * static_cast<double>(c.Lk) * 0x1.0p-24);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Lq; ++i) {
        const int64_t row = (b * c.Hq + h) * c.Lq + i;
        if (!fully_masked[static_cast<size_t>(row)]) continue;
        if (!c.sinks.empty() && c.sinks[static_cast<size_t>(h)] != -kInf) {
          // Only the sink is left: it takes all the weight under every policy (docs/semantics.md).
          const float sink = c.sinks[static_cast<size_t>(h)];
          for (int64_t d = 0; d < c.Dv; ++d)
            if (!(o[static_cast<size_t>(row * c.Dv + d)] == 0.0f)) fail(b, h, i, "O != 0 with a sink");
          if (c.want_weights)
            for (int64_t j = 0; j < c.Lk; ++j)
              if (!(r.weights[static_cast<size_t>(row * c.Lk + j)] == 0.0f)) fail(b, h, i, "weights != 0 with a sink");
          if (c.want_lse && !(r.lse[static_cast<size_t>(row)] == sink))
            fail(b, h, i, "lse = " + std::to_string(r.lse[static_cast<size_t>(row)]) + ", want the sink " +
                              std::to_string(sink));
          continue;
        }
        for (int64_t d = 0; d < c.Dv; ++d) {
          const float x = o[static_cast<size_t>(row * c.Dv + d)];
          if (c.policy == FullyMasked::zero && !(x == 0.0f)) {
            fail(b, h, i, "O[" + std::to_string(d) + "] = " + std::to_string(x) + ", want 0");
          } else if (c.policy == FullyMasked::nan && !std::isnan(x)) {
            fail(b, h, i, "O[" + std::to_string(d) + "] = " + std::to_string(x) + ", want NaN");
          } else if (c.policy == FullyMasked::uniform) {
            double mean = 0;
            for (int64_t j = 0; j < c.Lk; ++j) mean += clean.v.at(b, h / group, j, d);
            if (c.Lk > 0) mean /= static_cast<double>(c.Lk);
            if (!(std::fabs(x - mean) <= mean_tol))
              fail(b, h, i,
                   "O[" + std::to_string(d) + "] = " + std::to_string(x) +
                       ", want the mean of V over all keys " + std::to_string(mean));
          }
        }
        if (c.want_weights) {
          for (int64_t j = 0; j < c.Lk; ++j) {
            const float w = r.weights[static_cast<size_t>(row * c.Lk + j)];
            const bool good = c.policy == FullyMasked::zero  ? w == 0.0f
                              : c.policy == FullyMasked::nan ? std::isnan(w)
                                                             : std::fabs(w - 1.0 / c.Lk) <=
                                                                   4e-7 / c.Lk;
            if (!good)
              fail(b, h, i, "weights[" + std::to_string(j) + "] = " + std::to_string(w));
          }
        }
        if (c.want_lse) {
          const float l = r.lse[static_cast<size_t>(row)];
          if (!(std::isinf(l) && l < 0)) fail(b, h, i, "lse = " + std::to_string(l) + ", want -inf");
        }
      }
  EXPECT_EQ(failures, 0) << "fully masked rows break the policy:" << msg.str();
}

// Everything the contract says about one run, compared with the references on clean inputs.
// `expected_out` replaces the fp64 reference's O when the test knows better (NaN propagation).
void check_outputs(const Case& c, const CaseInputs& clean, const CaseRun& r, const CaseReferences& ref,
                   const std::vector<double>* expected_out = nullptr) {
  if (!r.ok || !ref.ok) return;
  Tolerance tol;
  tol.floor = c.floor;
  if (!c.unit_scale) {
    tol.cap = 0;
    tol.wide = true;
  }
  const std::vector<double>& want_o = expected_out ? *expected_out : ref.fp64.out;
  EXPECT_TRUE(compare_to_reference("O", r.out.dense(), want_o, ref.fp32.out,
                                   {c.B, c.Hq, c.Lq, c.Dv}, tol));
  const size_t nw = static_cast<size_t>(c.B * c.Hq * c.Lq * c.Lk);
  const size_t nl = static_cast<size_t>(c.B * c.Hq * c.Lq);
  if (c.want_weights) {
    const std::vector<float> w = head(r.weights, nw);
    EXPECT_TRUE(compare_to_reference("weights", w, ref.fp64.weights, ref.fp32.weights,
                                     {c.B, c.Hq, c.Lq, c.Lk}, tol));
    // Rows of weights sum to 1 (fp32 sum of Lk terms: a few ulps per term at worst), or with a
    // sink to 1 minus the sink's share, e^(sink - lse).
    const double sum_tol = 1e-5 + static_cast<double>(c.Lk) * 0x1.0p-24;
    int64_t bad = 0;
    std::string first;
    for (size_t row = 0; row < nl; ++row) {
      if (ref.fp64.fully_masked[row]) continue;
      double sum = 0, want = 1.0;
      for (int64_t j = 0; j < c.Lk; ++j) sum += w[row * static_cast<size_t>(c.Lk) + j];
      const size_t h = row / static_cast<size_t>(c.Lq) % static_cast<size_t>(c.Hq);
      if (!c.sinks.empty() && c.sinks[h] != -kInf) want = 1.0 - std::exp(double(c.sinks[h]) - ref.fp64.lse[row]);
      if (std::isfinite(sum) && std::fabs(sum - want) > sum_tol && bad++ == 0)
        first = format_index(static_cast<int64_t>(row), {c.B, c.Hq, c.Lq}) +
                " sums to " + std::to_string(sum);
    }
    EXPECT_EQ(bad, 0) << "rows of weights not summing to 1, first: " << first;
  }
  if (c.want_lse) {
    // lse is O(log Lk + max logit), not O(1): no absolute cap, and a floor that grows with it
    // (1e-6 relative: about 16 ulps, the rounding of a long dot product in the max logit).
    Tolerance lse_tol;
    lse_tol.cap = 0;
    lse_tol.floor = std::max(4e-6, c.floor);
    lse_tol.rel_floor = 1e-6;
    lse_tol.wide = tol.wide;
    EXPECT_TRUE(compare_to_reference("lse", head(r.lse, nl), ref.fp64.lse, ref.fp32.lse,
                                     {c.B, c.Hq, c.Lq}, lse_tol));
  }
  expect_untouched(c, r);
  expect_fully_masked_policy(c, clean, r, ref.fp64.fully_masked);
}

// One table row: a name (the test trace and the Rng label) and the setup of the problem.
struct Row {
  std::string name;
  std::function<void(Case&, Rng&)> setup;
};

class Differential : public TargetTest {
 protected:
  // Builds, runs and checks every row on this test's target.
  void run_rows(const std::vector<Row>& rows) {
    const std::string group = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string table = group.substr(0, group.find('/'));
    for (const Row& row : rows) {
      Rng rng(table + "/" + row.name);
      Case c;
      row.setup(c, rng);
      SCOPED_TRACE("case " + row.name + ": " + describe(c));
      const CaseInputs in = c.make_inputs(rng);
      const CaseReferences ref = run_reference(c, in);
      const CaseRun r = run_kernel(c, in, target());
      check_outputs(c, in, r, ref);
      ErrorLog::instance().count_case();
    }
  }
};

// ---------------------------------------------------------------------------------------------
// 1. Shapes, layouts and scale
// ---------------------------------------------------------------------------------------------

TEST_P(Differential, LengthsAroundLaneAndTileWidths) {
  std::vector<Row> rows;
  for (int64_t L : kLengths) {
    const std::string l = std::to_string(L);
    // Query tails: Lq sweeps, Lk fixed at an odd size spanning no full tile.
    rows.push_back({"lq" + l + "_lk37", [L](Case& c, Rng&) { c.dims(1, 2, 2, L, 37, 16, 16); }});
    // Key tails: Lk sweeps (partial key tiles and lane tails in the QK and PV loops).
    rows.push_back({"lq23_lk" + l, [L](Case& c, Rng&) { c.dims(2, 1, 1, 23, L, 19, 13); }});
    // Square causal: the diagonal tile at every size.
    rows.push_back({"causal_lq" + l + "_lk" + l, [L](Case& c, Rng&) {
                      c.dims(1, 2, 1, L, L, 32, 32);
                      c.causal = true;
                    }});
    // Decode-like few queries over a sweeping Lk, top-left causal with key padding.
    rows.push_back({"topleft_lq5_lk" + l + "_keylen", [L](Case& c, Rng&) {
                      c.dims(2, 1, 1, 5, L, 8, 24);
                      c.causal = true;
                      c.align = Align::top_left;
                      c.key_lengths = lengths({L, (2 * L) / 3});
                    }});
    // Both lengths padded: key and query lengths one short of L (boundary inside a lane group).
    rows.push_back({"padded_lq" + l + "_lk" + l, [L](Case& c, Rng&) {
                      c.dims(2, 1, 1, L, L, 17, 17);
                      c.key_lengths = lengths({L, std::max<int64_t>(L - 1, 0)});
                      c.query_lengths = lengths({std::max<int64_t>(L - 1, 0), L});
                    }});
  }
  // Unequal pairs across tile edges, both ways round.
  const std::pair<int64_t, int64_t> pairs[] = {{1, 129}, {129, 1}, {64, 65}, {65, 64}, {127, 128},
                                               {128, 127}, {16, 17}, {33, 31}, {8, 129}, {63, 2}};
  for (auto [lq, lk] : pairs) {
    rows.push_back({"pair_lq" + std::to_string(lq) + "_lk" + std::to_string(lk),
                    [lq = lq, lk = lk](Case& c, Rng&) { c.dims(1, 1, 1, lq, lk, 24, 24); }});
  }
  run_rows(rows);
}

TEST_P(Differential, HeadDimensions) {
  std::vector<Row> rows;
  const int64_t other[] = {17, 1, 128, 3, 59, 111};  // a Dv different from each D
  for (size_t n = 0; n < std::size(kHeadDims); ++n) {
    const int64_t D = kHeadDims[n], Dv = other[n];
    // D tails of the QK dot product (1, 3: less than a lane group; 17, 59, 111: odd tails).
    rows.push_back({"d" + std::to_string(D), [D](Case& c, Rng&) { c.dims(1, 2, 2, 33, 65, D, D); }});
    // Dv != D: the PV accumulator has its own width and tail.
    rows.push_back({"d" + std::to_string(D) + "_dv" + std::to_string(Dv), [D, Dv](Case& c, Rng&) {
                      c.dims(2, 1, 1, 16, 47, D, Dv);
                      c.causal = true;
                    }});
  }
  // Dv much larger than D (value heads wider than key heads).
  rows.push_back({"d8_dv256", [](Case& c, Rng&) { c.dims(1, 1, 1, 9, 70, 8, 256); }});
  // A large D with unit inputs: logits still O(1) through the default scale.
  rows.push_back({"d256", [](Case& c, Rng&) { c.dims(1, 1, 1, 20, 40, 256, 64); }});
  run_rows(rows);
}

TEST_P(Differential, BatchHeadsAndGroupedQueries) {
  std::vector<Row> rows = {
      // Several batches and heads: batch/head strides and per-(b, h) state.
      {"b3_h4", [](Case& c, Rng&) { c.dims(3, 4, 4, 33, 33, 16, 16); }},
      // GQA 6:2: query head h reads kv head h / 3.
      {"gqa_6_2", [](Case& c, Rng&) {
         c.dims(2, 6, 2, 17, 65, 32, 32);
         c.causal = true;
       }},
      // MQA: every query head reads the single kv head.
      {"mqa_6_1", [](Case& c, Rng&) { c.dims(2, 6, 1, 19, 40, 24, 8); }},
      // GQA with sequence-major storage (head stride D, row stride H*D).
      {"gqa_8_4_blhd", [](Case& c, Rng&) {
         c.dims(1, 8, 4, 21, 50, 16, 16).storage(Storage::blhd);
       }},
      // Per-query-head masks under GQA: bias and allowed differ between heads sharing a kv head.
      {"gqa_per_head_masks", [](Case& c, Rng& rng) {
         c.dims(2, 6, 2, 13, 37, 16, 16);
         c.bias = random_bias(rng, {2, 6, 13, 37});
         c.allowed = random_allowed(rng, {1, 6, 1, 37}, 0.7);
         c.alibi = alibi_slopes(6);
       }},
      // GQA decode: one query per head over a long padded cache.
      {"gqa_decode", [](Case& c, Rng&) {
         c.dims(2, 8, 2, 1, 300, 32, 32);
         c.key_lengths = lengths({300, 129});
         c.causal = true;
       }},
      // MQA with per-batch padding, one batch empty.
      {"mqa_key_lengths", [](Case& c, Rng&) {
         c.dims(3, 4, 1, 9, 33, 8, 8);
         c.key_lengths = lengths({33, 0, 17});
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, MemoryLayouts) {
  // One problem with GQA, Dv != D, causal and key padding, stored in every way a caller can.
  auto base = [](Case& c) {
    c.dims(2, 4, 2, 19, 70, 24, 20);
    c.causal = true;
    c.key_lengths = lengths({70, 45});
  };
  std::vector<Row> rows = {
      // Contiguous [B, H, L, D].
      {"bhld", [base](Case& c, Rng&) { base(c); c.storage(Storage::bhld); }},
      // Contiguous [B, L, H, D] (made with maskattn::blhd's strides).
      {"blhd", [base](Case& c, Rng&) { base(c); c.storage(Storage::blhd); }},
      // Gaps between rows, heads and batches, misaligned base: only the view may be touched.
      {"padded_bhld", [base](Case& c, Rng&) { base(c); c.storage(Storage::padded_bhld); }},
      {"padded_blhd", [base](Case& c, Rng&) { base(c); c.storage(Storage::padded_blhd); }},
      // Every tensor in a different layout.
      {"mixed", [base](Case& c, Rng&) {
         base(c);
         c.q_storage = Storage::blhd;
         c.k_storage = Storage::padded_bhld;
         c.v_storage = Storage::padded_blhd;
         c.o_storage = Storage::padded_bhld;
       }},
      // Q, K, V slices of one fused projection [B, L, 3, H, D]; output sequence-major.
      {"qkv_packed", [](Case& c, Rng&) {
         c.dims(2, 3, 3, 37, 37, 16, 16);
         c.q_storage = c.k_storage = c.v_storage = Storage::qkv_packed;
         c.o_storage = Storage::blhd;
         c.causal = true;
       }},
      // D = 1 with padded rows: row stride 4, a lane group straddles rows.
      {"padded_d1", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 17, 33, 1, 1).storage(Storage::padded_bhld);
       }},
      // D = 128 padded, misaligned: the wide-vector path on unaligned rows.
      {"padded_d128", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 33, 65, 128, 128).storage(Storage::padded_blhd);
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, Scale) {
  auto base = [](Case& c) {
    c.dims(1, 2, 2, 17, 40, 32, 16);
    c.key_lengths = lengths({37});
  };
  std::vector<Row> rows = {
      // Default 1/sqrt(D).
      {"default", [base](Case& c, Rng&) { base(c); }},
      // 0: every logit 0, uniform weights over the allowed keys.
      {"zero", [base](Case& c, Rng&) { base(c); c.scale = 0.0f; }},
      // 0 with causal: uniform over a different key count per row.
      {"zero_causal", [base](Case& c, Rng&) {
         base(c);
         c.scale = 0.0f;
         c.causal = true;
       }},
      // Negative: flips the ordering of the logits.
      {"negative", [base](Case& c, Rng&) { base(c); c.scale = -0.3f; }},
      {"minus_one", [base](Case& c, Rng&) { base(c); c.scale = -1.0f; }},
      // Custom small and O(1) scales.
      {"small", [base](Case& c, Rng&) { base(c); c.scale = 0.01f; }},
      {"one", [base](Case& c, Rng&) { base(c); c.scale = 1.0f; }},
      // Large logits (|s| up to ~150): no overflow; the fp32 rounding of s (ulp 1.5e-5) sets
      // the error, so no 1e-5 cap and a floor of a few such ulps.
      {"large_30", [base](Case& c, Rng&) {
         base(c);
         c.scale = 30.0f;
         c.unit_scale = false;
         c.floor = 1e-4;
       }},
      // |s| ~ 1e4 (ulp 1e-3): checks overflow and NaN, not precision; weights are nearly one-hot.
      {"huge_1e4", [base](Case& c, Rng&) {
         base(c);
         c.scale = 1e4f;
         c.unit_scale = false;
         c.floor = 1e-2;
       }},
      // Large input values with the default scale: |V| up to 30, |s| up to ~500 (ulp 3e-5).
      {"large_inputs", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 16, 33, 16, 16);
         c.lo = -30.0f;
         c.hi = 30.0f;
         c.unit_scale = false;
         c.floor = 2e-3;
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, EmptyAndDegenerateShapes) {
  std::vector<Row> rows = {
      // The smallest problem.
      {"one_by_one", [](Case& c, Rng&) { c.dims(1, 1, 1, 1, 1, 1, 1); }},
      // No queries: nothing to compute or write.
      {"lq0", [](Case& c, Rng&) { c.dims(2, 2, 1, 0, 17, 8, 8); }},
      // No batches.
      {"b0", [](Case& c, Rng&) { c.dims(0, 2, 1, 5, 17, 8, 8); }},
      // No keys: every row fully masked (policy zero here; all policies in FullyMaskedRows).
      {"lk0", [](Case& c, Rng&) { c.dims(1, 2, 1, 5, 0, 8, 8).storage(Storage::padded_bhld); }},
      // D = 0: every logit 0, uniform weights (scale defaults to 1).
      {"d0", [](Case& c, Rng&) { c.dims(1, 2, 2, 7, 19, 0, 5); }},
      // D = 0 with causal: uniform over the causal prefix of each row.
      {"d0_causal", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 9, 9, 0, 3);
         c.causal = true;
       }},
      // Dv = 0: O is empty, weights and lse are still computed.
      {"dv0", [](Case& c, Rng&) { c.dims(1, 1, 1, 6, 11, 4, 0); }},
      // A single key: weight 1 (or 0 when masked).
      {"lk1_padded_queries", [](Case& c, Rng&) {
         c.dims(2, 1, 1, 7, 1, 8, 8);
         c.query_lengths = lengths({7, 3});
       }},
  };
  run_rows(rows);
}

// ---------------------------------------------------------------------------------------------
// 2. Every mask rule of Options, alone and combined
// ---------------------------------------------------------------------------------------------

TEST_P(Differential, BiasBroadcastShapes) {
  // B=2, Hq=4 (GQA over Hkv=2), 33 x 70: crosses a tile edge in both directions.
  auto base = [](Case& c) { c.dims(2, 4, 2, 33, 70, 16, 16); };
  std::vector<Row> rows = {
      // Full [B, Hq, Lq, Lk].
      {"full", [base](Case& c, Rng& rng) { base(c); c.bias = random_bias(rng, {2, 4, 33, 70}); }},
      // Key padding as a bias [B, 1, 1, Lk] with -inf on masked keys (the ONNX / HF pattern).
      {"key_padding_b11k", [base](Case& c, Rng& rng) {
         base(c);
         c.bias = random_bias(rng, {2, 1, 1, 70});
         for (int64_t j = 50; j < 70; ++j) c.bias.at(0, 0, 0, j) = -kInf;
         for (int64_t j = 0; j < 70; j += 3) c.bias.at(1, 0, 0, j) = -kInf;
       }},
      // A shared [1, 1, Lq, Lk] mask: causal expressed as a bias.
      {"causal_as_bias_11qk", [base](Case& c, Rng&) {
         base(c);
         c.bias = MaskBuffer<float>::dense({1, 1, 33, 70}, 0.0f);
         for (int64_t i = 0; i < 33; ++i)
           for (int64_t j = 0; j < 70; ++j)
             if (j > i + (70 - 33)) c.bias.at(0, 0, i, j) = -kInf;
       }},
      // Random [1, 1, Lq, Lk].
      {"random_11qk", [base](Case& c, Rng& rng) { base(c); c.bias = random_bias(rng, {1, 1, 33, 70}); }},
      // Per-head constant [1, Hq, 1, 1] (softmax-invariant, but must still broadcast).
      {"per_head_1h11", [base](Case& c, Rng& rng) { base(c); c.bias = random_bias(rng, {1, 4, 1, 1}, -5, 5); }},
      // Per-row constants [B, 1, Lq, 1] (Lk stride 0).
      {"per_row_b1q1", [base](Case& c, Rng& rng) { base(c); c.bias = random_bias(rng, {2, 1, 33, 1}, -5, 5); }},
      // One key row shared by everything [1, 1, 1, Lk].
      {"keys_111k", [base](Case& c, Rng& rng) { base(c); c.bias = random_bias(rng, {1, 1, 1, 70}); }},
      // [B, Hq, 1, Lk]: per-head key bias.
      {"bh1k", [base](Case& c, Rng& rng) { base(c); c.bias = random_bias(rng, {2, 4, 1, 70}); }},
      // A strided view: head dimension broadcast by stride 0 with its full size, rows padded
      // with NaN that must never be read.
      {"strided_view", [base](Case& c, Rng& rng) {
         base(c);
         const int64_t row = 70 + 3;
         c.bias.shape = {2, 4, 33, 70};
         c.bias.strides = {33 * row, 0, row, 1};
         c.bias.data.assign(static_cast<size_t>(2 * 33 * row), kNaN);
         for (int64_t b = 0; b < 2; ++b)
           for (int64_t i = 0; i < 33; ++i)
             for (int64_t j = 0; j < 70; ++j) c.bias.at(b, 0, i, j) = rng.uniform(-2, 2);
       }},
      // Bias on a decode row over a long cache.
      {"decode_b11k", [](Case& c, Rng& rng) {
         c.dims(2, 2, 2, 1, 257, 32, 32);
         c.bias = random_bias(rng, {2, 1, 1, 257});
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, AllowedBroadcastShapes) {
  auto base = [](Case& c) { c.dims(2, 4, 2, 33, 70, 16, 16); };
  std::vector<Row> rows = {
      // Full random [B, Hq, Lq, Lk], mostly allowed.
      {"full_p70", [base](Case& c, Rng& rng) { base(c); c.allowed = random_allowed(rng, {2, 4, 33, 70}, 0.7); }},
      // Sparse: many rows with one or no key (fully masked rows appear).
      {"full_p05", [base](Case& c, Rng& rng) { base(c); c.allowed = random_allowed(rng, {2, 4, 33, 70}, 0.05); }},
      // Key padding mask [B, 1, 1, Lk].
      {"key_padding_b11k", [base](Case& c, Rng& rng) { base(c); c.allowed = random_allowed(rng, {2, 1, 1, 70}, 0.6); }},
      // Shared [1, 1, Lq, Lk] pattern.
      {"shared_11qk", [base](Case& c, Rng& rng) { base(c); c.allowed = random_allowed(rng, {1, 1, 33, 70}, 0.5); }},
      // Whole heads switched off [1, Hq, 1, 1].
      {"heads_1h11", [base](Case& c, Rng&) {
         base(c);
         c.allowed = MaskBuffer<uint8_t>::dense({1, 4, 1, 1}, 1);
         c.allowed.at(0, 2, 0, 0) = 0;
       }},
      // Query rows switched off [B, 1, Lq, 1].
      {"rows_b1q1", [base](Case& c, Rng& rng) { base(c); c.allowed = random_allowed(rng, {2, 1, 33, 1}, 0.7); }},
      // Nonzero values other than 1 mean allowed too.
      {"nonzero_is_true", [base](Case& c, Rng& rng) {
         base(c);
         c.allowed = random_allowed(rng, {2, 4, 33, 70}, 0.7);
         for (uint8_t& x : c.allowed.data)
           if (x) x = static_cast<uint8_t>(rng.uniform_int(1, 255));
       }},
      // Whole 64-key blocks off and on: a kernel may skip or fast-path them.
      {"block_pattern", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 70, 200, 16, 16);
         c.allowed = MaskBuffer<uint8_t>::dense({1, 1, 70, 200}, 0);
         for (int64_t i = 0; i < 70; ++i)
           for (int64_t j = 0; j < 200; ++j)
             c.allowed.at(0, 0, i, j) = ((j / 64 + i / 32) % 2 == 0) ? 1 : 0;
       }},
      // A strided view: padded rows (padding 0x5A must not be read), batch broadcast by stride 0.
      {"strided_view", [base](Case& c, Rng& rng) {
         base(c);
         const int64_t row = 70 + 5;
         c.allowed.shape = {2, 4, 33, 70};
         c.allowed.strides = {0, 33 * row, row, 1};
         c.allowed.data.assign(static_cast<size_t>(4 * 33 * row), 0x5A);
         for (int64_t h = 0; h < 4; ++h)
           for (int64_t i = 0; i < 33; ++i)
             for (int64_t j = 0; j < 70; ++j) c.allowed.at(0, h, i, j) = rng.bernoulli(0.6);
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, SequenceLengths) {
  std::vector<Row> rows = {
      // Key lengths around tile and lane edges, plus 0 and full.
      {"key_lengths", [](Case& c, Rng&) {
         c.dims(8, 2, 1, 17, 129, 16, 16);
         c.key_lengths = lengths({129, 0, 1, 63, 64, 65, 128, 15});
       }},
      // Query lengths: padding rows attend nothing.
      {"query_lengths", [](Case& c, Rng&) {
         c.dims(6, 2, 2, 70, 33, 16, 16);
         c.query_lengths = lengths({70, 0, 1, 63, 64, 65});
       }},
      // Both, with the padded diagonal: bottom-right uses the valid lengths.
      {"both_causal_bottom_right", [](Case& c, Rng&) {
         c.dims(4, 2, 2, 40, 70, 16, 16);
         c.causal = true;
         c.key_lengths = lengths({70, 33, 65, 5});
         c.query_lengths = lengths({40, 17, 40, 7});
       }},
      {"both_causal_top_left", [](Case& c, Rng&) {
         c.dims(4, 2, 2, 40, 70, 16, 16);
         c.causal = true;
         c.align = Align::top_left;
         c.key_lengths = lengths({70, 33, 65, 5});
         c.query_lengths = lengths({40, 17, 40, 7});
       }},
      // Query length longer than key length under bottom-right: leading rows fully masked.
      {"qlen_gt_klen_bottom_right", [](Case& c, Rng&) {
         c.dims(2, 1, 1, 64, 64, 16, 16);
         c.causal = true;
         c.key_lengths = lengths({20, 64});
         c.query_lengths = lengths({50, 64});
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, CausalAlignments) {
  std::vector<Row> rows;
  // (Lq, Lk): square, decode, short/long either way, and tile-edge sizes.
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1},    {1, 129},  {1, 1000}, {17, 64},
                                                {64, 17},  {129, 31}, {31, 129}, {65, 65},
                                                {128, 128}, {100, 300}};
  for (auto [lq, lk] : shapes) {
    for (Align a : {Align::bottom_right, Align::top_left}) {
      const std::string name = std::string(a == Align::bottom_right ? "br" : "tl") + "_lq" +
                               std::to_string(lq) + "_lk" + std::to_string(lk);
      rows.push_back({name, [lq = lq, lk = lk, a](Case& c, Rng&) {
                        c.dims(1, 2, 1, lq, lk, 16, 16);
                        c.causal = true;
                        c.align = a;
                      }});
    }
  }
  run_rows(rows);
}

TEST_P(Differential, SlidingWindows) {
  std::vector<Row> rows;
  // (left, right) windows: zero-width, one-sided, unbounded sides, and tile-sized.
  const std::pair<int64_t, int64_t> windows[] = {{0, 0},  {1, 0},   {0, 1},  {3, 5},  {16, -1},
                                                 {-1, 16}, {-1, -1}, {63, 0}, {64, 0}, {65, 0}};
  for (auto [left, right] : windows) {
    const std::string w = "w" + std::to_string(left) + "_" + std::to_string(right);
    // Square, no causal flag: the window alone.
    rows.push_back({w + "_square", [left = left, right = right](Case& c, Rng&) {
                      c.dims(1, 2, 2, 150, 150, 16, 16);
                      c.window = {left, right};
                    }});
    // With causal (right side clipped to the diagonal), Lq < Lk bottom-right.
    rows.push_back({w + "_causal_br", [left = left, right = right](Case& c, Rng&) {
                      c.dims(1, 1, 1, 40, 150, 16, 16);
                      c.window = {left, right};
                      c.causal = true;
                    }});
    // Top-left with Lq > Lk and key padding.
    rows.push_back({w + "_tl_keylen", [left = left, right = right](Case& c, Rng&) {
                      c.dims(2, 1, 1, 90, 70, 16, 16);
                      c.window = {left, right};
                      c.align = Align::top_left;
                      c.key_lengths = lengths({70, 33});
                    }});
  }
  run_rows(rows);
}

TEST_P(Differential, PrefixLm) {
  std::vector<Row> rows = {
      // Bidirectional prefix shorter than a tile, then causal.
      {"p5", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 100, 100, 16, 16);
         c.causal = true;
         c.prefix = 5;
       }},
      // Prefix ending exactly on and just past a tile edge.
      {"p64", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 100, 100, 16, 16);
         c.causal = true;
         c.prefix = 64;
       }},
      {"p65", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 100, 100, 16, 16);
         c.causal = true;
         c.prefix = 65;
       }},
      // Prefix covering every key: fully bidirectional.
      {"p_all", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 33, 33, 16, 16);
         c.causal = true;
         c.prefix = 33;
       }},
      // Prefix with a sliding window: the prefix stays visible outside the window.
      {"p10_window", [](Case& c, Rng&) {
         c.dims(1, 2, 1, 120, 120, 16, 16);
         c.window = {4, 0};
         c.prefix = 10;
       }},
      // Prefix longer than some batches' key length: key padding still wins (rules AND).
      {"p40_keylen", [](Case& c, Rng&) {
         c.dims(2, 1, 1, 60, 60, 16, 16);
         c.causal = true;
         c.prefix = 40;
         c.key_lengths = lengths({60, 25});
       }},
      // Lq != Lk, both alignments.
      {"p20_br_lq30_lk90", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 30, 90, 16, 16);
         c.causal = true;
         c.prefix = 20;
       }},
      {"p20_tl_lq30_lk90", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 30, 90, 16, 16);
         c.causal = true;
         c.align = Align::top_left;
         c.prefix = 20;
       }},
      // Prefix 0 is plain causal.
      {"p0", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 40, 40, 16, 16);
         c.causal = true;
         c.prefix = 0;
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, Segments) {
  std::vector<Row> rows = {
      // Packed documents with causal: block-diagonal causal attention.
      {"packed_causal", [](Case& c, Rng& rng) {
         c.dims(2, 2, 2, 100, 100, 16, 16);
         c.causal = true;
         c.query_segments = packed_segments(rng, 2, 100, 0.05);
         c.key_segments = c.query_segments;
       }},
      // Packed documents, bidirectional inside each.
      {"packed_bidirectional", [](Case& c, Rng& rng) {
         c.dims(1, 1, 1, 130, 130, 16, 16);
         c.query_segments = packed_segments(rng, 1, 130, 0.03);
         c.key_segments = c.query_segments;
       }},
      // Random ids, Lq != Lk: scattered per-element masking.
      {"random_ids", [](Case& c, Rng& rng) {
         c.dims(2, 2, 1, 33, 70, 16, 16);
         c.query_segments = random_segments(rng, 2, 33, 3);
         c.key_segments = random_segments(rng, 2, 70, 3);
       }},
      // Query ids absent from the keys: fully masked rows.
      {"absent_ids", [](Case& c, Rng& rng) {
         c.dims(1, 2, 2, 20, 40, 16, 16);
         c.query_segments = random_segments(rng, 1, 20, 4);
         c.key_segments = random_segments(rng, 1, 40, 2);
       }},
      // With key padding and GQA.
      {"keylen_gqa", [](Case& c, Rng& rng) {
         c.dims(2, 6, 2, 50, 80, 16, 16);
         c.key_lengths = lengths({80, 41});
         c.query_segments = packed_segments(rng, 2, 50, 0.1);
         c.key_segments = packed_segments(rng, 2, 80, 0.06);
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, AlibiSlopes) {
  std::vector<Row> rows = {
      // Bidirectional: distance |d(i) - j| on both sides of the diagonal.
      {"bidirectional", [](Case& c, Rng&) {
         c.dims(1, 8, 8, 33, 33, 16, 16);
         c.alibi = alibi_slopes(8);
       }},
      // Causal bottom-right with Lq < Lk: the diagonal is shifted by Lk - Lq.
      {"causal_br", [](Case& c, Rng&) {
         c.dims(1, 4, 2, 30, 90, 16, 16);
         c.causal = true;
         c.alibi = alibi_slopes(4);
       }},
      // Top-left alignment: distance from d(i) = i.
      {"causal_tl", [](Case& c, Rng&) {
         c.dims(1, 4, 2, 30, 90, 16, 16);
         c.causal = true;
         c.align = Align::top_left;
         c.alibi = alibi_slopes(4);
       }},
      // Padded lengths move the diagonal (d(i) = i + kLen - qLen).
      {"padded_lengths", [](Case& c, Rng&) {
         c.dims(3, 2, 1, 40, 70, 16, 16);
         c.alibi = alibi_slopes(2);
         c.key_lengths = lengths({70, 31, 65});
         c.query_lengths = lengths({40, 12, 40});
       }},
      // Zero and negative slopes (a negative slope rewards distance).
      {"zero_negative", [](Case& c, Rng&) {
         c.dims(1, 3, 3, 20, 40, 16, 16);
         c.alibi = {0.0f, -0.25f, 0.5f};
       }},
      // Steep slopes: logits down to about -1000, so no 1e-5 cap.
      {"steep", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 64, 130, 16, 16);
         c.alibi = {8.0f, 1.0f};
         c.unit_scale = false;
       }},
  };
  run_rows(rows);
}

// Learned attention sinks: one virtual key per head with logit sinks[h] and value 0.
std::vector<float> random_sinks(Rng& rng, int64_t hq) {
  std::vector<float> s;
  for (int64_t h = 0; h < hq; ++h) s.push_back(rng.bernoulli(0.15) ? -kInf : rng.uniform(-4.0f, 4.0f));
  return s;
}

TEST_P(Differential, Sinks) {
  std::vector<Row> rows = {
      {"dense", [](Case& c, Rng& rng) {
         c.dims(2, 4, 2, 33, 70, 16, 16);
         c.sinks = random_sinks(rng, 4);
       }},
      // Sinks far above and far below the logits: the max moves to the sink, or the sink vanishes.
      {"dominant_and_negligible", [](Case& c, Rng&) {
         c.dims(1, 3, 1, 20, 40, 16, 8);
         c.sinks = {30.0f, -30.0f, 0.0f};
       }},
      // Decode shapes (GQA, few rows), causal bottom-right with padded keys.
      {"decode_causal_padded", [](Case& c, Rng& rng) {
         c.dims(3, 8, 2, 2, 300, 32, 32);
         c.causal = true;
         c.key_lengths = lengths({300, 17, 0});
         c.sinks = random_sinks(rng, 8);
       }},
      // Fully masked rows under every policy: only the sink remains, O = 0 and lse = sink.
      {"fully_masked_rows", [](Case& c, Rng& rng) {
         c.dims(2, 2, 2, 17, 40, 16, 16);
         c.key_lengths = lengths({40, 0});
         c.query_lengths = lengths({10, 17});
         c.sinks = {1.5f, -kInf};  // head 1: no sink, the policy decides
         c.policy = rng.bernoulli(0.5) ? FullyMasked::nan : FullyMasked::uniform;
       }},
      {"with_every_rule", [](Case& c, Rng& rng) {
         c.dims(2, 4, 2, 64, 96, 16, 16);
         c.causal = true;
         c.window = {40, -1};
         c.alibi = alibi_slopes(4);
         c.softcap = 5.0f;
         c.bias = random_bias(rng, {2, 1, 64, 96});
         c.sinks = random_sinks(rng, 4);
       }},
  };
  run_rows(rows);
}

// A random tree of n nodes in topological order (parent < child), with up to `roots` roots.
std::vector<int32_t> random_tree(Rng& rng, int64_t n) {
  std::vector<int32_t> parent;
  for (int64_t i = 0; i < n; ++i)
    parent.push_back(i == 0 || rng.bernoulli(0.1) ? -1 : int32_t(rng.uniform_int(std::max<int64_t>(0, i - 4), i - 1)));
  return parent;
}

// Tree verification against the reference, which walks the parent indices per pair (the kernels use
// pre-order ranges); the boolean-mask equivalence is in the conformance suite.
TEST_P(Differential, TreeVerification) {
  std::vector<Row> rows = {
      {"chain_is_causal", [](Case& c, Rng&) {
         c.dims(1, 4, 1, 16, 200, 32, 32);
         c.causal = true;
         for (int i = 0; i < 16; ++i) c.tree.push_back(i - 1);
       }},
      {"medusa_like_16", [](Case& c, Rng& rng) {
         c.dims(1, 8, 2, 16, 500, 64, 64);
         c.causal = true;
         c.tree = random_tree(rng, 16);
       }},
      {"per_sequence_trees_ragged", [](Case& c, Rng& rng) {
         c.dims(3, 4, 4, 24, 150, 16, 16);
         c.key_lengths = lengths({150, 24, 77});
         for (int b = 0; b < 3; ++b)
           for (int32_t x : random_tree(rng, 24)) c.tree.push_back(x);
       }},
      {"many_nodes_prefill", [](Case& c, Rng& rng) {
         c.dims(1, 2, 1, 100, 260, 16, 16);
         c.causal = true;
         c.tree = random_tree(rng, 100);
         c.sinks = {0.5f, -1.0f};
       }},
      {"with_window_and_allowed", [](Case& c, Rng& rng) {
         c.dims(2, 2, 1, 12, 90, 16, 16);
         c.causal = true;
         c.window = {30, 0};
         c.allowed = random_allowed(rng, {2, 1, 12, 90}, 0.9);
         c.tree = random_tree(rng, 12);
       }},
  };
  run_rows(rows);
}

// RoPE (docs/semantics.md "Rotary position embedding"): Q and K rotated at their positions, key j at
// j + offset and query i at Lk - Lq + i + offset, against the fp64 reference's own rotation.
TEST_P(Differential, Rope) {
  using maskattn::Rope;
  using maskattn::RopeLayout;
  std::vector<Row> rows;
  for (RopeLayout layout : {RopeLayout::halves, RopeLayout::interleaved}) {
    const std::string l = layout == RopeLayout::halves ? "halves" : "interleaved";
    rows.push_back({l + "_prefill_causal", [=](Case& c, Rng&) {
                      c.dims(1, 2, 2, 70, 70, 64, 32);
                      c.causal = true;
                      c.rope = Rope{10000, 0, layout, 0};
                    }});
    rows.push_back({l + "_decode_gqa_offset", [=](Case& c, Rng&) {
                      c.dims(2, 8, 2, 1, 300, 128, 128);
                      c.causal = true;
                      c.rope = Rope{500000, 0, layout, 4000};
                    }});
    rows.push_back({l + "_partial_dims", [=](Case& c, Rng&) {
                      c.dims(2, 4, 1, 5, 129, 59 + 1, 17);  // dims 16 of D 60 (GPT-J rotates the first 64 of 256)
                      c.causal = true;
                      c.rope = Rope{10000, 16, layout, 0};
                    }});
    rows.push_back({l + "_blhd_window_lengths", [=](Case& c, Rng&) {
                      c.dims(2, 4, 2, 33, 100, 32, 32);
                      c.storage(Storage::blhd);
                      c.causal = true;
                      c.window = {20, -1};
                      c.key_lengths = lengths({100, 60});
                      c.rope = Rope{10000, 32, layout, 7};
                    }});
    rows.push_back({l + "_large_positions", [=](Case& c, Rng&) {  // angles formed in double at p ~ 2^31
                      c.dims(1, 2, 1, 3, 40, 16, 16);
                      c.rope = Rope{10000, 0, layout, (int64_t(1) << 31) - 100};
                    }});
  }
  rows.push_back({"lq_beyond_lk_negative_positions", [=](Case& c, Rng&) {  // query 0 at Lk - Lq < 0
                    c.dims(1, 2, 1, 20, 8, 16, 16);
                    c.rope = Rope{100, 0, RopeLayout::halves, 0};
                  }});
  rows.push_back({"with_tree_sinks_alibi", [=](Case& c, Rng& rng) {
                    c.dims(1, 4, 2, 12, 90, 32, 32);
                    c.causal = true;
                    c.tree = random_tree(rng, 12);
                    c.sinks = random_sinks(rng, 4);
                    c.alibi = alibi_slopes(4);
                    c.rope = Rope{10000, 0, RopeLayout::interleaved, 3};
                  }});
  run_rows(rows);
}

TEST_P(Differential, Softcap) {
  std::vector<Row> rows = {
      // A cap near the logit range (Gemma 2 uses 50 for attention at larger scales).
      {"cap5", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 33, 70, 32, 32);
         c.softcap = 5.0f;
         c.scale = 3.0f;
         c.unit_scale = false;
       }},
      // A cap well below the logits: tanh saturates.
      {"cap0_5_saturating", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 33, 70, 32, 32);
         c.softcap = 0.5f;
         c.scale = 20.0f;
       }},
      // A cap far above the logits: nearly the identity.
      {"cap50", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 17, 40, 16, 16);
         c.softcap = 50.0f;
       }},
      // Softcap before bias: -inf entries stay -inf, finite bias is added after the cap.
      {"with_bias_inf", [](Case& c, Rng& rng) {
         c.dims(1, 2, 2, 20, 45, 16, 16);
         c.softcap = 2.0f;
         c.scale = 4.0f;
         c.bias = random_bias(rng, {1, 2, 20, 45});
         for (float& x : c.bias.data)
           if (rng.bernoulli(0.2)) x = -kInf;
       }},
      // Softcap with causal and ALiBi (ALiBi is added after the cap).
      {"with_causal_alibi", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 40, 40, 16, 16);
         c.softcap = 1.5f;
         c.scale = 2.0f;
         c.causal = true;
         c.alibi = alibi_slopes(2);
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, ExtremeBiasValues) {
  // Contract edge cases: -inf, -1e4, -1e9, -3.4e38 biases.
  auto base = [](Case& c) { c.dims(1, 2, 2, 24, 70, 16, 16); };
  std::vector<Row> rows = {
      // A random mix per element (every row keeps some 0-bias keys).
      {"mixed_per_element", [base](Case& c, Rng& rng) {
         base(c);
         const float values[] = {-kInf, -1e4f, -1e9f, -3.4e38f};
         c.bias = MaskBuffer<float>::dense({1, 2, 24, 70}, 0.0f);
         for (float& x : c.bias.data)
           if (rng.bernoulli(0.4)) x = values[rng.uniform_int(0, 3)];
       }},
      // Rows whose only finite keys have -1e4: softmax over those, shifted.
      {"rows_only_minus_1e4", [base](Case& c, Rng& rng) {
         base(c);
         c.bias = MaskBuffer<float>::dense({1, 1, 24, 70}, -kInf);
         for (float& x : c.bias.data)
           if (rng.bernoulli(0.5)) x = -1e4f;
         c.unit_scale = false;  // s - 1e4 rounds in fp32 by up to 5e-4 (ulp(1e4) / 2)
         c.floor = 2e-3;
       }},
      // Every key -1e9 or -3.4e38 on some rows: finite, so not fully masked; in fp32 the logits
      // all round to the same value and the weights become (nearly) uniform, like the naive fp32
      // reference (hence no cap). A kernel that multiplies -3.4e38 by log2(e) gets -inf and
      // wrongly treats the row as fully masked.
      {"rows_all_huge_negative", [base](Case& c, Rng& rng) {
         base(c);
         c.bias = random_bias(rng, {1, 1, 24, 70});
         for (int64_t j = 0; j < 70; ++j) {
           c.bias.at(0, 0, 3, j) = -1e9f;
           c.bias.at(0, 0, 7, j) = -3.4e38f;
           c.bias.at(0, 0, 11, j) = j % 2 ? -3.4e38f : -kInf;
         }
         c.unit_scale = false;
       }},
      // -3.4e38 bias with ALiBi and softcap added: must not overflow to -inf or NaN.
      {"huge_negative_plus_alibi", [base](Case& c, Rng&) {
         base(c);
         c.bias = MaskBuffer<float>::dense({1, 1, 24, 70}, 0.0f);
         for (int64_t j = 0; j < 70; j += 2) c.bias.at(0, 0, 0, j) = -3.4e38f;
         c.alibi = {0.5f, 0.125f};
         c.softcap = 10.0f;
         c.unit_scale = false;
       }},
  };
  run_rows(rows);
}

TEST_P(Differential, MaskCombinations) {
  std::vector<Row> rows = {
      // The usual decoder batch: causal + key/query padding + GQA + sequence-major storage.
      {"decoder_batch", [](Case& c, Rng&) {
         c.dims(3, 6, 2, 40, 70, 32, 32).storage(Storage::blhd);
         c.causal = true;
         c.key_lengths = lengths({70, 50, 1});
         c.query_lengths = lengths({40, 25, 1});
       }},
      // Everything at once.
      {"all_rules", [](Case& c, Rng& rng) {
         c.dims(2, 4, 2, 50, 90, 24, 16);
         c.causal = true;
         c.window = {30, -1};
         c.prefix = 6;
         c.key_lengths = lengths({90, 61});
         c.query_lengths = lengths({50, 33});
         c.query_segments = packed_segments(rng, 2, 50, 0.05);
         c.key_segments = packed_segments(rng, 2, 90, 0.03);
         c.allowed = random_allowed(rng, {2, 1, 1, 90}, 0.9);
         c.bias = random_bias(rng, {1, 4, 50, 90});
         c.alibi = alibi_slopes(4);
         c.softcap = 8.0f;
       }},
      // Window + segments + bias, top-left.
      {"window_segments_bias_tl", [](Case& c, Rng& rng) {
         c.dims(1, 2, 2, 80, 80, 16, 16);
         c.window = {10, 3};
         c.align = Align::top_left;
         c.query_segments = packed_segments(rng, 1, 80, 0.04);
         c.key_segments = c.query_segments;
         c.bias = random_bias(rng, {1, 1, 80, 80});
       }},
      // Allowed + bias with -inf + causal: three sources of masking on the same pairs.
      {"allowed_bias_causal", [](Case& c, Rng& rng) {
         c.dims(2, 2, 1, 64, 64, 16, 16);
         c.causal = true;
         c.allowed = random_allowed(rng, {2, 2, 64, 64}, 0.8);
         c.bias = random_bias(rng, {2, 1, 64, 64});
         for (float& x : c.bias.data)
           if (rng.bernoulli(0.1)) x = -kInf;
       }},
  };
  // Random combinations: each rule on with probability 1/2, random shapes from the length list.
  for (int n = 0; n < 32; ++n) {
    rows.push_back({"random_" + std::to_string(n), [](Case& c, Rng& rng) {
                      const int64_t hkv = rng.uniform_int(1, 2), hq = hkv * rng.uniform_int(1, 3);
                      const int64_t b = rng.uniform_int(1, 3);
                      const int64_t lq = kLengths[rng.uniform_int(0, std::size(kLengths) - 1)];
                      const int64_t lk = kLengths[rng.uniform_int(0, std::size(kLengths) - 1)];
                      const int64_t d = kHeadDims[rng.uniform_int(0, 4)];
                      c.dims(b, hq, hkv, lq, lk, d, rng.bernoulli(0.5) ? d : 24);
                      const Storage st[] = {Storage::bhld, Storage::blhd, Storage::padded_bhld,
                                            Storage::padded_blhd};
                      c.q_storage = st[rng.uniform_int(0, 3)];
                      c.k_storage = st[rng.uniform_int(0, 3)];
                      c.v_storage = st[rng.uniform_int(0, 3)];
                      c.o_storage = st[rng.uniform_int(0, 3)];
                      c.causal = rng.bernoulli(0.5);
                      c.align = rng.bernoulli(0.5) ? Align::bottom_right : Align::top_left;
                      if (rng.bernoulli(0.3)) c.window = {rng.uniform_int(-1, 20), rng.uniform_int(-1, 20)};
                      if (rng.bernoulli(0.2)) c.prefix = rng.uniform_int(0, lk);
                      auto lens = [&](int64_t L) {
                        std::vector<int32_t> v;
                        for (int64_t i = 0; i < b; ++i)
                          v.push_back(static_cast<int32_t>(rng.uniform_int(0, L)));
                        return v;
                      };
                      if (rng.bernoulli(0.5)) c.key_lengths = lens(lk);
                      if (rng.bernoulli(0.3)) c.query_lengths = lens(lq);
                      if (rng.bernoulli(0.3)) {
                        c.query_segments = packed_segments(rng, b, lq, 0.1);
                        c.key_segments = packed_segments(rng, b, lk, 0.1);
                      }
                      if (rng.bernoulli(0.4))
                        c.allowed = random_allowed(
                            rng, {rng.bernoulli(0.5) ? b : 1, rng.bernoulli(0.5) ? hq : 1,
                                  rng.bernoulli(0.5) ? lq : 1, lk},
                            0.8);
                      if (rng.bernoulli(0.4))
                        c.bias = random_bias(rng, {rng.bernoulli(0.5) ? b : 1,
                                                   rng.bernoulli(0.5) ? hq : 1, lq,
                                                   rng.bernoulli(0.7) ? lk : 1});
                      if (rng.bernoulli(0.3)) c.alibi = alibi_slopes(hq);
                      if (rng.bernoulli(0.2)) c.sinks = random_sinks(rng, hq);
                      if (rng.bernoulli(0.2) && c.query_lengths.empty() && lq <= lk &&
                          (c.key_lengths.empty() ||
                           *std::min_element(c.key_lengths.begin(), c.key_lengths.end()) >= lq))
                        c.tree = random_tree(rng, lq);
                      if (rng.bernoulli(0.2)) c.softcap = 4.0f;
                      if (rng.bernoulli(0.3)) c.scale = rng.uniform(-1.0f, 1.0f);
                    }});
  }
  run_rows(rows);
}

// ---------------------------------------------------------------------------------------------
// 3. Fully masked rows under every policy
// ---------------------------------------------------------------------------------------------

TEST_P(Differential, FullyMaskedRows) {
  // Each scenario masks some rows completely (and leaves others partially masked), in a
  // different way; all run under zero, nan and uniform.
  const std::vector<Row> scenarios = {
      // A batch with key length 0.
      {"key_length_0", [](Case& c, Rng&) {
         c.dims(2, 4, 2, 17, 40, 16, 8);
         c.key_lengths = lengths({40, 0});
       }},
      // Query padding rows.
      {"query_padding", [](Case& c, Rng&) {
         c.dims(2, 2, 2, 33, 20, 16, 16).storage(Storage::padded_blhd);
         c.query_lengths = lengths({33, 3});
       }},
      // `allowed` false on whole rows.
      {"allowed_rows_false", [](Case& c, Rng& rng) {
         c.dims(1, 2, 1, 30, 70, 16, 16);
         c.allowed = random_allowed(rng, {1, 2, 30, 70}, 0.8);
         for (int64_t i : {0, 5, 29})
           for (int64_t j = 0; j < 70; ++j) c.allowed.at(0, 1, i, j) = 0;
       }},
      // `allowed` false everywhere.
      {"allowed_all_false", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 9, 33, 16, 16);
         c.allowed = MaskBuffer<uint8_t>::dense({1, 1, 1, 1}, 0);
       }},
      // Bias -inf on every key of some rows.
      {"bias_rows_minus_inf", [](Case& c, Rng& rng) {
         c.dims(2, 2, 1, 21, 65, 16, 16);
         c.bias = random_bias(rng, {2, 1, 21, 65});
         for (int64_t j = 0; j < 65; ++j) {
           c.bias.at(0, 0, 4, j) = -kInf;
           c.bias.at(1, 0, 20, j) = -kInf;
         }
       }},
      // No keys at all.
      {"lk_0", [](Case& c, Rng&) { c.dims(2, 2, 1, 7, 0, 16, 16); }},
      // Bottom-right causal with Lq > Lk: rows i < Lq - Lk see no key.
      {"causal_lq_gt_lk", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 70, 20, 16, 16);
         c.causal = true;
       }},
      // A zero-width window pushed off the keys (bottom-right, Lq > Lk).
      {"window_off_the_keys", [](Case& c, Rng&) {
         c.dims(1, 1, 1, 40, 30, 16, 16);
         c.window = {0, 0};
       }},
      // Segments with no matching key.
      {"segments_no_match", [](Case& c, Rng& rng) {
         c.dims(1, 2, 2, 25, 50, 16, 16);
         c.query_segments = random_segments(rng, 1, 25, 3);
         c.key_segments = random_segments(rng, 1, 50, 2);
       }},
  };
  const FullyMasked policies[] = {FullyMasked::zero, FullyMasked::nan, FullyMasked::uniform};
  for (const Row& s : scenarios) {
    for (FullyMasked p : policies) {
      const std::string name = s.name + (p == FullyMasked::zero  ? "/zero"
                                         : p == FullyMasked::nan ? "/nan"
                                                                 : "/uniform");
      Rng rng("FullyMaskedRows/" + s.name);  // same data under every policy
      Case c;
      s.setup(c, rng);
      c.policy = p;
      SCOPED_TRACE("case " + name + ": " + describe(c));
      const CaseInputs in = c.make_inputs(rng);
      const CaseReferences ref = run_reference(c, in);
      if (!ref.ok) continue;
      const auto& fm = ref.fp64.fully_masked;
      EXPECT_TRUE(std::count(fm.begin(), fm.end(), 1) > 0)
          << "test bug: the scenario masks no row completely";
      check_outputs(c, in, run_kernel(c, in, target()), ref);
      ErrorLog::instance().count_case();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 4. Garbage in masked-out data never leaks; NaN in attended data propagates
// ---------------------------------------------------------------------------------------------

// NaN, infinities and huge values: a kernel that zeroes a masked weight and multiplies
// (0 * inf = NaN) or adds a -inf bias to a NaN score leaks them.
float garbage(int64_t n) {
  const float values[] = {kNaN, kInf, -kInf, 3.4e38f, -1e30f, -kNaN};
  return values[n % 6];
}

struct GarbageRow {
  std::string name;
  std::function<void(Case&, Rng&)> setup;
  // Keys (b, kv head, j) and query rows (b, q head, i) that no rule lets anything attend.
  std::function<bool(const Case&, int64_t, int64_t, int64_t)> dirty_key;
  std::function<bool(const Case&, int64_t, int64_t, int64_t)> dirty_query;
};

TEST_P(Differential, GarbageInMaskedDataDoesNotLeak) {
  auto none = [](const Case&, int64_t, int64_t, int64_t) { return false; };
  const std::vector<GarbageRow> rows = {
      // Padding keys beyond key_lengths, spanning several tiles.
      {"key_padding",
       [](Case& c, Rng&) {
         c.dims(4, 2, 1, 20, 150, 16, 16);
         c.key_lengths = lengths({5, 64, 0, 129});
       },
       [](const Case& c, int64_t b, int64_t, int64_t j) { return j >= c.key_lengths[b]; }, none},
      // Keys beyond the last query's diagonal, inside the diagonal tile (top-left, Lq < Lk).
      {"causal_diagonal_tile",
       [](Case& c, Rng&) {
         c.dims(1, 2, 2, 17, 100, 16, 16);
         c.causal = true;
         c.align = Align::top_left;
       },
       [](const Case&, int64_t, int64_t, int64_t j) { return j >= 17; }, none},
      // Keys outside a narrow window, before and after it.
      {"window",
       [](Case& c, Rng&) {
         c.dims(1, 1, 1, 16, 128, 16, 16);
         c.align = Align::top_left;
         c.window = {2, 3};
       },
       [](const Case&, int64_t, int64_t, int64_t j) { return j >= 19; }, none},
      // Keys switched off by a key-padding `allowed` mask.
      {"allowed_keys",
       [](Case& c, Rng&) {
         c.dims(2, 2, 2, 30, 90, 16, 16);
         c.allowed = MaskBuffer<uint8_t>::dense({2, 1, 1, 90}, 1);
         for (int64_t j = 0; j < 90; ++j) {
           c.allowed.at(0, 0, 0, j) = j % 3 != 0;
           c.allowed.at(1, 0, 0, j) = j < 40;
         }
       },
       [](const Case&, int64_t b, int64_t, int64_t j) { return b == 0 ? j % 3 == 0 : j >= 40; },
       none},
      // Keys whose bias is -inf for every query (an -inf bias masks the pair).
      {"bias_minus_inf_keys",
       [](Case& c, Rng& rng) {
         c.dims(1, 2, 1, 25, 70, 16, 16);
         c.bias = random_bias(rng, {1, 1, 1, 70});
         for (int64_t j = 0; j < 70; j += 4) c.bias.at(0, 0, 0, j) = -kInf;
       },
       [](const Case&, int64_t, int64_t, int64_t j) { return j % 4 == 0; }, none},
      // Keys of a segment no query belongs to.
      {"segments",
       [](Case& c, Rng&) {
         c.dims(1, 1, 1, 20, 60, 16, 16);
         c.query_segments.assign(20, 1);
         c.key_segments.resize(60);
         for (int64_t j = 0; j < 60; ++j) c.key_segments[j] = (j / 7) % 2 ? 2 : 1;
       },
       [](const Case&, int64_t, int64_t, int64_t j) { return (j / 7) % 2 == 1; }, none},
      // Query padding rows hold garbage: they are fully masked, so O = 0 (never NaN).
      {"query_padding_rows",
       [](Case& c, Rng&) {
         c.dims(2, 2, 1, 40, 33, 16, 16);
         c.query_lengths = lengths({40, 9});
       },
       none,
       [](const Case& c, int64_t b, int64_t, int64_t i) { return i >= c.query_lengths[b]; }},
      // Leading rows of a bottom-right causal Lq > Lk problem see no key: garbage Q is ignored.
      {"causal_rows_before_first_key",
       [](Case& c, Rng&) {
         c.dims(1, 1, 1, 50, 20, 16, 16);
         c.causal = true;
       },
       none, [](const Case&, int64_t, int64_t, int64_t i) { return i < 30; }},
  };
  for (const GarbageRow& row : rows) {
    Rng rng("Garbage/" + row.name);
    Case c;
    row.setup(c, rng);
    SCOPED_TRACE("case " + row.name + ": " + describe(c));
    const CaseInputs clean = c.make_inputs(rng);
    CaseInputs dirty = clean;
    int64_t n = 0, dirty_keys = 0, dirty_rows = 0;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hkv; ++h)
        for (int64_t j = 0; j < c.Lk; ++j)
          if (row.dirty_key(c, b, h, j)) {
            ++dirty_keys;
            for (int64_t d = 0; d < c.D; ++d) dirty.k.at(b, h, j, d) = garbage(n++);
            for (int64_t d = 0; d < c.Dv; ++d) dirty.v.at(b, h, j, d) = garbage(n++);
          }
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.Lq; ++i)
          if (row.dirty_query(c, b, h, i)) {
            ++dirty_rows;
            for (int64_t d = 0; d < c.D; ++d) dirty.q.at(b, h, i, d) = garbage(n++);
          }
    ASSERT_GT(dirty_keys + dirty_rows, 0) << "test bug: nothing poisoned";
    const CaseReferences ref = run_reference(c, clean);
    if (!ref.ok) continue;
    // Test sanity: the clean reference gives every poisoned key weight 0 and flags every
    // poisoned row fully masked (otherwise the scenario is wrong, not the kernel).
    const int64_t group = c.Hq / c.Hkv;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.Lq; ++i) {
          const size_t r = static_cast<size_t>((b * c.Hq + h) * c.Lq + i);
          if (row.dirty_query(c, b, h, i)) {
            ASSERT_TRUE(ref.fp64.fully_masked[r]) << "test bug: poisoned row " << i;
          }
          for (int64_t j = 0; j < c.Lk; ++j) {
            if (row.dirty_key(c, b, h / group, j)) {
              ASSERT_EQ(ref.fp64.weights[r * static_cast<size_t>(c.Lk) + j], 0.0)
                  << "test bug: poisoned key " << j << " is attended by row " << i;
            }
          }
        }
    check_outputs(c, clean, run_kernel(c, dirty, target()), ref);
    ErrorLog::instance().count_case();
  }
}

// One poisoned element (d = -1: the whole row of the tensor).
struct Poison {
  char tensor;  // 'q', 'k' or 'v'
  int64_t b, h, l, d;
};

struct PropagationRow {
  std::string name;
  std::function<void(Case&, Rng&)> setup;
  std::vector<Poison> poison;
};

TEST_P(Differential, NanInAttendedDataPropagates) {
  const std::vector<PropagationRow> rows = {
      // NaN in one query element: that row of O is NaN, nothing else.
      {"q_element", [](Case& c, Rng&) { c.dims(2, 4, 2, 33, 33, 16, 16); }, {{'q', 1, 2, 5, 3}}},
      // NaN in a key shared by a GQA group: every row of the 3 query heads reading it is NaN,
      // the other group is untouched.
      {"k_element_gqa_group",
       [](Case& c, Rng&) { c.dims(2, 6, 2, 17, 40, 16, 16); },
       {{'k', 1, 1, 10, 0}}},
      // NaN in one value element: only that output column, in the rows attending the key.
      {"v_element_causal",
       [](Case& c, Rng&) {
         c.dims(1, 2, 1, 40, 40, 16, 16);
         c.causal = true;
       },
       {{'v', 0, 0, 7, 2}}},
      // NaN in the last key of a causal square: only the last row attends it (diagonal tile).
      {"k_last_key_causal",
       [](Case& c, Rng&) {
         c.dims(1, 1, 1, 64, 64, 16, 16);
         c.causal = true;
       },
       {{'k', 0, 0, 63, -1}}},
      // NaN in a key inside a sliding window: only the rows whose window holds it.
      {"v_row_window",
       [](Case& c, Rng&) {
         c.dims(1, 1, 1, 100, 100, 16, 8);
         c.window = {5, 5};
       },
       {{'v', 0, 0, 50, -1}}},
      // NaN in a query padding row is ignored while NaN in a valid row is not.
      {"q_padding_and_valid",
       [](Case& c, Rng&) {
         c.dims(1, 1, 1, 20, 30, 16, 16);
         c.query_lengths = lengths({10});
       },
       {{'q', 0, 0, 15, -1}, {'q', 0, 0, 2, 0}}},
  };
  for (const PropagationRow& row : rows) {
    Rng rng("Propagation/" + row.name);
    Case c;
    row.setup(c, rng);
    c.want_weights = false;  // only O is specified for NaN data
    c.want_lse = false;
    SCOPED_TRACE("case " + row.name + ": " + describe(c));
    const CaseInputs clean = c.make_inputs(rng);
    CaseInputs dirty = clean;
    Case with_weights = c;
    with_weights.want_weights = true;
    const CaseReferences ref = run_reference(with_weights, clean);
    if (!ref.ok) continue;
    std::vector<double> expected = ref.fp64.out;
    const int64_t group = c.Hq / c.Hkv;
    auto set_nan = [&](int64_t b, int64_t h, int64_t i, int64_t d) {
      for (int64_t e = 0; e < c.Dv; ++e)
        if (d < 0 || e == d)
          expected[static_cast<size_t>(((b * c.Hq + h) * c.Lq + i) * c.Dv + e)] = NAN;
    };
    for (const Poison& p : row.poison) {
      Tensor& t = p.tensor == 'q' ? dirty.q : p.tensor == 'k' ? dirty.k : dirty.v;
      for (int64_t d = 0; d < t.shape[3]; ++d)
        if (p.d < 0 || d == p.d) t.at(p.b, p.h, p.l, d) = kNaN;
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.Lq; ++i) {
          const size_t r = static_cast<size_t>((p.b * c.Hq + h) * c.Lq + i);
          if (ref.fp64.fully_masked[r]) continue;
          if (p.tensor == 'q') {
            if (h == p.h && i == p.l) set_nan(p.b, h, i, -1);
          } else if (h / group == p.h &&
                     ref.fp64.weights[r * static_cast<size_t>(c.Lk) + p.l] > 0) {
            set_nan(p.b, h, i, p.tensor == 'k' ? -1 : p.d);  // NaN score: whole row
          }
        }
    }
    check_outputs(c, clean, run_kernel(c, dirty, target()), ref, &expected);
    ErrorLog::instance().count_case();
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Softmax shift invariance
// ---------------------------------------------------------------------------------------------

TEST_P(Differential, ConstantBiasShiftInvariance) {
  const std::vector<Row> rows = {
      // Per-row constants [1, 1, Lq, 1] cycling through small, large, positive and negative.
      {"per_row", [](Case& c, Rng&) {
         c.dims(1, 2, 2, 33, 70, 32, 32);
         c.bias = MaskBuffer<float>::dense({1, 1, 33, 1}, 0.0f);
         const float cs[] = {3.5f, -100.0f, 0.25f, -7.75f, 12.0f};
         for (int64_t i = 0; i < 33; ++i) c.bias.at(0, 0, i, 0) = cs[i % 5];
       }},
      // Per-head constants [1, Hq, 1, 1] under GQA.
      {"per_head", [](Case& c, Rng&) {
         c.dims(2, 4, 2, 20, 65, 16, 16);
         c.bias = MaskBuffer<float>::dense({1, 4, 1, 1}, 0.0f);
         const float cs[] = {3.5f, -100.0f, 42.0f, -0.5f};
         for (int64_t h = 0; h < 4; ++h) c.bias.at(0, h, 0, 0) = cs[h];
       }},
      // One constant for everything, with causal and key padding (only allowed keys shift).
      {"scalar_causal_padded", [](Case& c, Rng&) {
         c.dims(2, 2, 1, 40, 40, 16, 16);
         c.causal = true;
         c.key_lengths = lengths({40, 23});
         c.bias = MaskBuffer<float>::dense({1, 1, 1, 1}, -100.0f);
       }},
      // A constant over the allowed keys of each row, -inf elsewhere (a mask in bias form).
      {"constant_with_minus_inf", [](Case& c, Rng& rng) {
         c.dims(1, 1, 1, 30, 50, 16, 16);
         c.bias = MaskBuffer<float>::dense({1, 1, 30, 50}, 3.5f);
         for (float& x : c.bias.data)
           if (rng.bernoulli(0.3)) x = -kInf;
       }},
  };
  for (const Row& row : rows) {
    Rng rng("Shift/" + row.name);
    Case c;
    row.setup(c, rng);
    // |c| up to 100: logits are no longer O(1); s + c rounds to half an ulp of |c| + |s| (|s| < 2
    // here), which moves each weight by at most one such ulp relatively; |V| <= 1.
    float max_c = 0;
    for (float x : c.bias.data)
      if (std::isfinite(x)) max_c = std::max(max_c, std::fabs(x));
    const double ulp = std::ldexp(1.0, std::ilogb(max_c + 2.0f) - 23);
    c.unit_scale = false;
    c.floor = 2e-6 + 2.0 * ulp;
    SCOPED_TRACE("case " + row.name + ": " + describe(c));
    const CaseInputs in = c.make_inputs(rng);
    const CaseReferences ref = run_reference(c, in);
    const CaseRun biased = run_kernel(c, in, target());
    check_outputs(c, in, biased, ref);  // against the reference, 2x-naive policy

    // The same problem with the constant removed (finite entries -> 0, -inf stays).
    Case plain = c;
    for (float& x : plain.bias.data)
      if (std::isfinite(x)) x = 0.0f;
    const CaseRun unbiased = run_kernel(plain, in, target());
    if (!biased.ok || !unbiased.ok) continue;
    const double tol = c.floor;  // fp32 rounding of s + c, as above
    const std::vector<float> a = biased.out.dense(), b = unbiased.out.dense();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
    EXPECT_LE(worst, tol) << "biased and unbiased outputs differ beyond fp32 rounding of the "
                             "constant (max |c| " << max_c << ")";
    ErrorLog::instance().count_case();
  }
}

// ---------------------------------------------------------------------------------------------
// 7. Optional outputs and untouched buffers
// ---------------------------------------------------------------------------------------------

TEST_P(Differential, OptionalOutputs) {
  // Every subset of {weights, lse}: O is right with or without them, and each is right alone.
  for (int mask = 0; mask < 4; ++mask) {
    for (Storage out : {Storage::bhld, Storage::padded_blhd}) {
      const std::string name = std::string(mask & 1 ? "weights" : "no_weights") +
                               (mask & 2 ? "_lse" : "_no_lse") + "_" + storage_name(out);
      Rng rng("OptionalOutputs/" + name);
      Case c;
      c.dims(2, 4, 2, 37, 70, 16, 16);
      c.o_storage = out;
      c.causal = true;
      c.key_lengths = lengths({70, 20});
      c.query_lengths = lengths({37, 30});
      c.want_weights = mask & 1;
      c.want_lse = mask & 2;
      SCOPED_TRACE("case " + name + ": " + describe(c));
      const CaseInputs in = c.make_inputs(rng);
      check_outputs(c, in, run_kernel(c, in, target()), run_reference(c, in));
      ErrorLog::instance().count_case();
    }
  }
}

TEST_P(Differential, NothingWrittenOutsideTheOutputs) {
  // Empty problems must not write at all: the whole buffer keeps its sentinel.
  const std::vector<Row> rows = {
      // No queries.
      {"lq0", [](Case& c, Rng&) { c.dims(2, 2, 2, 0, 9, 8, 8).storage(Storage::padded_bhld); }},
      // No batches.
      {"b0", [](Case& c, Rng&) { c.dims(0, 2, 2, 4, 9, 8, 8).storage(Storage::padded_blhd); }},
      // Padded output under the uniform policy with fully masked rows (fills whole rows).
      {"uniform_padded_out", [](Case& c, Rng&) {
         c.dims(2, 2, 1, 12, 9, 8, 5).storage(Storage::padded_blhd);
         c.policy = FullyMasked::uniform;
         c.key_lengths = lengths({0, 9});
       }},
      // Padded output under the nan policy.
      {"nan_padded_out", [](Case& c, Rng&) {
         c.dims(2, 2, 1, 12, 9, 8, 5).storage(Storage::padded_bhld);
         c.policy = FullyMasked::nan;
         c.query_lengths = lengths({3, 12});
       }},
  };
  run_rows(rows);
}

// ---------------------------------------------------------------------------------------------
// 8. Tile statistics (only inequalities: exact counts belong to the kernel)
// ---------------------------------------------------------------------------------------------

TEST_P(Differential, StatsCausalSkipsTiles) {
  Rng rng("Stats/causal");
  Case c;
  c.dims(1, 1, 1, 256, 256, 64, 64);
  c.causal = true;
  c.want_weights = false;
  const CaseInputs in = c.make_inputs(rng);
  Stats stats;
  const CaseRun r = run_kernel(c, in, target(), &stats);
  check_outputs(c, in, r, run_reference(c, in));
  // Tiles entirely above the diagonal hold no allowed pair and are skipped.
  EXPECT_GT(stats.tiles_skipped, 0);
  EXPECT_GT(stats.tiles_full + stats.tiles_mixed, 0);
  // Counters are added to, not overwritten.
  Stats again = stats;
  run_kernel(c, in, target(), &again);
  EXPECT_EQ(again.tiles_skipped, 2 * stats.tiles_skipped);
  EXPECT_EQ(again.tiles_full, 2 * stats.tiles_full);
  EXPECT_EQ(again.tiles_mixed, 2 * stats.tiles_mixed);
  ErrorLog::instance().count_case();
}

TEST_P(Differential, StatsUnmaskedHasOnlyFullTiles) {
  // Lk a multiple of every target's key tile (64 natively, 128 in WebAssembly), no rule: every
  // tile is full; nothing skipped, nothing masked per element.
  for (auto [lq, lk] : {std::pair<int64_t, int64_t>{256, 256}, {128, 384}, {64, 128}}) {
    Rng rng("Stats/unmasked");
    Case c;
    c.dims(1, 2, 1, lq, lk, 32, 32);
    c.want_weights = false;
    SCOPED_TRACE("Lq=" + std::to_string(lq) + " Lk=" + std::to_string(lk));
    const CaseInputs in = c.make_inputs(rng);
    Stats stats;
    check_outputs(c, in, run_kernel(c, in, target(), &stats), run_reference(c, in));
    EXPECT_EQ(stats.tiles_skipped, 0);
    EXPECT_EQ(stats.tiles_mixed, 0);
    EXPECT_GT(stats.tiles_full, 0);
    ErrorLog::instance().count_case();
  }
}

TEST_P(Differential, StatsNoFullTileWhenEverythingIsMasked) {
  // key_lengths 0 everywhere: no tile can have every pair allowed.
  Rng rng("Stats/all_masked");
  Case c;
  c.dims(2, 1, 1, 128, 128, 16, 16);
  c.key_lengths = lengths({0, 0});
  const CaseInputs in = c.make_inputs(rng);
  Stats stats;
  check_outputs(c, in, run_kernel(c, in, target(), &stats), run_reference(c, in));
  EXPECT_EQ(stats.tiles_full, 0);
  ErrorLog::instance().count_case();
}

// Same inputs, same call: bit-identical results (no uninitialised scratch, no hidden state).
TEST_P(Differential, RepeatedCallsAreBitwiseIdentical) {
  Rng rng("Repeat");
  Case c;
  c.dims(2, 4, 2, 65, 130, 59, 17);
  c.causal = true;
  c.key_lengths = lengths({130, 77});
  c.bias = random_bias(rng, {2, 1, 65, 130});
  const CaseInputs in = c.make_inputs(rng);
  const CaseRun a = run_kernel(c, in, target());
  const CaseRun b = run_kernel(c, in, target());
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(0, std::memcmp(a.out.buf.data(), b.out.buf.data(), a.out.buf.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)));
}

// Threads only decide who computes which unit: 1, 2, 3 and 8 threads give bitwise identical
// results, on problems large enough that the library really uses several threads (several query
// blocks per head for prefill; several split-K chunks per group for decode).
TEST_P(Differential, ThreadCountDoesNotChangeResults) {
  Rng rng("Threads");
  std::vector<Case> cases(3);
  cases[0].dims(2, 8, 2, 3, 2100, 64, 48);  // decode-shaped: 12 rows per group, 5 chunks of 512 keys
  cases[0].causal = true;
  cases[0].key_lengths = lengths({2100, 1500});
  cases[0].sinks = {0.5f, -1.0f, 2.0f, -kInf, 0.0f, 1.0f, 3.0f, -2.0f};  // sinks after the split-K merge
  cases[0].tree = {-1, 0, 0};
  cases[1].dims(1, 4, 4, 300, 300, 64, 64);  // prefill-shaped: several query blocks per head
  cases[1].causal = true;
  cases[1].window = {100, 0};
  cases[2].dims(2, 4, 2, 40, 900, 32, 32);  // mixed masks on a split problem
  cases[2].allowed = random_allowed(rng, {2, 1, 40, 900}, 0.7);
  cases[2].alibi = {0.5f, 0.25f, 0.125f, 0.0625f};
  for (const Case& base : cases) {
    const CaseInputs in = base.make_inputs(rng);
    Case one = base;
    const CaseRun first = run_kernel(one, in, target());
    ASSERT_TRUE(first.ok);
    check_outputs(one, in, first, run_reference(one, in));
    for (int threads : {2, 3, 8}) {
      Case c = base;
      c.threads = threads;
      Stats stats;
      const CaseRun r = run_kernel(c, in, target(), &stats);
      ASSERT_TRUE(r.ok);
#if !defined(__EMSCRIPTEN__) || defined(__EMSCRIPTEN_PTHREADS__)
      EXPECT_GE(stats.threads_used, 2) << "the problem must really split across threads";
#endif
      EXPECT_EQ(0, std::memcmp(first.out.buf.data(), r.out.buf.data(), r.out.buf.size() * sizeof(float)))
          << threads << " threads";
      EXPECT_EQ(0, std::memcmp(first.weights.data(), r.weights.data(), r.weights.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(first.lse.data(), r.lse.data(), r.lse.size() * sizeof(float)));
    }
  }
}

MASKATTN_INSTANTIATE_FOR_TARGETS(Differential);

}  // namespace
