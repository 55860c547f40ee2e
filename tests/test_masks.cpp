// The mask-building helpers (maskattn/masks.hpp): their values, their argument checks, and that each
// built mask used as Options::allowed (or, via to_additive_mask, as Options::bias) gives the same
// attention as the equivalent compact rule, on `automatic` and on every kernel target available here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "maskattn/masks.hpp"
#include "test_support.hpp"

namespace {

using maskattn::Align;
using maskattn::ArgumentError;
using maskattn::Target;
using maskattn_test::Rng;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<uint8_t> bits(const std::string& s) {
  std::vector<uint8_t> v;
  for (char c : s)
    if (c == '0' || c == '1') v.push_back(static_cast<uint8_t>(c - '0'));
  return v;
}

// Runs `call` and checks it throws ArgumentError naming `argument` with `fragment` in the message.
template <class F>
void expect_argument_error(F&& call, const std::string& argument, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "expected ArgumentError for " << argument;
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message '" << e.what() << "' lacks '" << fragment << "'";
    EXPECT_FALSE(e.is_type_error());
  }
}

// automatic plus every kernel target this build and CPU can run.
std::vector<Target> targets() {
  std::vector<Target> out = {Target::automatic};
  for (Target t : maskattn_test::kernel_targets())
    if (maskattn::target_available(t)) out.push_back(t);
  return out;
}

struct Problem {
  int64_t B, Hq, Hkv, Lq, Lk, D;
  std::vector<float> q, k, v;
  Problem(Rng& rng, int64_t B_, int64_t Hq_, int64_t Hkv_, int64_t Lq_, int64_t Lk_, int64_t D_)
      : B(B_), Hq(Hq_), Hkv(Hkv_), Lq(Lq_), Lk(Lk_), D(D_) {
    q.resize(static_cast<size_t>(B * Hq * Lq * D));
    k.resize(static_cast<size_t>(B * Hkv * Lk * D));
    v.resize(static_cast<size_t>(B * Hkv * Lk * D));
    for (auto* buf : {&q, &k, &v})
      for (float& x : *buf) x = rng.uniform(-1.0f, 1.0f);
  }
  std::vector<float> run(maskattn::Options opt, Target target) const {
    opt.target = target;
    std::vector<float> out(static_cast<size_t>(B * Hq * Lq * D), 12345.0f);
    maskattn::attention(maskattn::bhld(q.data(), B, Hq, Lq, D), maskattn::bhld(k.data(), B, Hkv, Lk, D),
                        maskattn::bhld(v.data(), B, Hkv, Lk, D), maskattn::bhld(out.data(), B, Hq, Lq, D), opt);
    return out;
  }
};

// Same attention up to fp32 rounding (the kernel may take a different tile path for a dense mask
// than for a compact rule); fully masked rows are exactly 0 in both.
void expect_same(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(std::isnan(a[i]) || std::isnan(b[i])) << what << " [" << i << "]";
    ASSERT_NEAR(a[i], b[i], 2e-6f * std::max(1.0f, std::fabs(b[i]))) << what << " [" << i << "]";
    if (b[i] == 0.0f) ASSERT_EQ(a[i], 0.0f) << what << " [" << i << "]";
  }
}

const char* align_name(Align a) { return a == Align::top_left ? "top_left" : "bottom_right"; }

// ---------------------------------------------------------------------------------------- values

TEST(Masks, CausalMaskValues) {
  EXPECT_EQ(maskattn::create_causal_mask(3, 3), bits("100 110 111"));
  EXPECT_EQ(maskattn::create_causal_mask(3, 3, Align::top_left), bits("100 110 111"));
  // Lq < Lk: bottom-right lets the last query see every key (KV-cache decoding).
  EXPECT_EQ(maskattn::create_causal_mask(2, 4), bits("1110 1111"));
  EXPECT_EQ(maskattn::create_causal_mask(2, 4, Align::top_left), bits("1000 1100"));
  EXPECT_EQ(maskattn::create_causal_mask(1, 5), bits("11111"));
  // Lq > Lk: bottom-right leaves the first Lq - Lk rows fully masked.
  EXPECT_EQ(maskattn::create_causal_mask(4, 2), bits("00 00 10 11"));
  EXPECT_EQ(maskattn::create_causal_mask(4, 2, Align::top_left), bits("10 11 11 11"));
  EXPECT_TRUE(maskattn::create_causal_mask(0, 5).empty());
  EXPECT_TRUE(maskattn::create_causal_mask(5, 0).empty());
}

TEST(Masks, PaddingMaskValues) {
  EXPECT_EQ(maskattn::create_padding_mask({3, 0, 5, 1}, 5), bits("11100 00000 11111 10000"));
  EXPECT_TRUE(maskattn::create_padding_mask({}, 5).empty());
  EXPECT_EQ(maskattn::create_padding_mask({0, 0}, 0).size(), 0u);
}

TEST(Masks, WindowMaskValues) {
  // Lq == Lk == 5: both alignments agree.
  for (Align a : {Align::bottom_right, Align::top_left}) {
    SCOPED_TRACE(align_name(a));
    EXPECT_EQ(maskattn::create_window_mask(5, 5, 1, 0, a), bits("10000 11000 01100 00110 00011"));
    EXPECT_EQ(maskattn::create_window_mask(5, 5, 0, 0, a), bits("10000 01000 00100 00010 00001"));
    EXPECT_EQ(maskattn::create_window_mask(5, 5, 0, 1, a), bits("11000 01100 00110 00011 00001"));
    EXPECT_EQ(maskattn::create_window_mask(5, 5, -1, -1, a), std::vector<uint8_t>(25, 1));
    EXPECT_EQ(maskattn::create_window_mask(5, 5, -1, 0, a), maskattn::create_causal_mask(5, 5, a));
    EXPECT_EQ(maskattn::create_window_mask(5, 5, 2, -1, a), bits("11111 11111 11111 01111 00111"));
  }
  // Lq != Lk: d(i) = i + 2 (bottom-right) or i (top-left).
  EXPECT_EQ(maskattn::create_window_mask(2, 4, 1, 0), bits("0110 0011"));
  EXPECT_EQ(maskattn::create_window_mask(2, 4, 1, 0, Align::top_left), bits("1000 1100"));
  EXPECT_EQ(maskattn::create_window_mask(4, 2, 0, 1), bits("00 10 11 01"));  // d = -2, -1, 0, 1
  EXPECT_TRUE(maskattn::create_window_mask(0, 3, 1, 1).empty());
}

TEST(Masks, SegmentsFromLengthsValues) {
  EXPECT_EQ(maskattn::segments_from_lengths({3, 0, 2}, 7), (std::vector<int32_t>{0, 0, 0, 2, 2, -1, -1}));
  EXPECT_EQ(maskattn::segments_from_lengths({2, 2}, 4), (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(maskattn::segments_from_lengths({}, 3), (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_TRUE(maskattn::segments_from_lengths({0}, 0).empty());
}

TEST(Masks, FromKeyPaddingMaskInvertsPolarity) {
  // PyTorch key_padding_mask: nonzero = ignore.
  const std::vector<uint8_t> ignore = {0, 1, 0, 2, 255};
  EXPECT_EQ(maskattn::from_key_padding_mask(ignore), bits("10100"));
  EXPECT_EQ(maskattn::from_key_padding_mask(ignore.data(), 3), bits("101"));
  EXPECT_TRUE(maskattn::from_key_padding_mask(nullptr, 0).empty());
  // Round trip with create_padding_mask: ignore = padding.
  std::vector<uint8_t> pytorch = bits("00011 01111");
  EXPECT_EQ(maskattn::from_key_padding_mask(pytorch), maskattn::create_padding_mask({3, 1}, 5));
}

TEST(Masks, ToAdditiveMaskValues) {
  const std::vector<float> bias = maskattn::to_additive_mask({1, 0, 7, 0});
  ASSERT_EQ(bias.size(), 4u);
  EXPECT_EQ(bias[0], 0.0f);
  EXPECT_EQ(bias[1], -kInf);
  EXPECT_EQ(bias[2], 0.0f);
  EXPECT_EQ(bias[3], -kInf);
  EXPECT_FALSE(std::signbit(bias[0]));
  EXPECT_TRUE(maskattn::to_additive_mask({}).empty());
}

// ---------------------------------------------------------------------------------------- errors

TEST(Masks, ArgumentErrors) {
  const int64_t too_long = maskattn::kMaxMaskLength + 1;
  expect_argument_error([] { maskattn::create_causal_mask(-1, 4); }, "Lq", "given -1");
  expect_argument_error([] { maskattn::create_causal_mask(4, -3); }, "Lk", "given -3");
  expect_argument_error([&] { maskattn::create_causal_mask(2, too_long); }, "Lk", "<= 8388608");
  expect_argument_error([] { maskattn::create_causal_mask(2, 2, static_cast<Align>(7)); }, "align", "given 7");

  expect_argument_error([] { maskattn::create_padding_mask({3, 6}, 5); }, "lengths[1]", "<= L = 5, given 6");
  expect_argument_error([] { maskattn::create_padding_mask({-1}, 5); }, "lengths[0]", "given -1");
  expect_argument_error([] { maskattn::create_padding_mask({1}, -2); }, "L", "given -2");

  expect_argument_error([] { maskattn::create_window_mask(3, 3, -2, 0); }, "left", "given -2");
  expect_argument_error([] { maskattn::create_window_mask(3, 3, 0, -5); }, "right", "given -5");
  expect_argument_error([] { maskattn::create_window_mask(-1, 3, 0, 0); }, "Lq", "given -1");
  expect_argument_error([] { maskattn::create_window_mask(3, 3, 0, 0, static_cast<Align>(-1)); }, "align", "given -1");

  expect_argument_error([] { maskattn::segments_from_lengths({2, -1}, 5); }, "lengths[1]", "given -1");
  expect_argument_error([] { maskattn::segments_from_lengths({3, 3}, 5); }, "lengths", "L = 5");
  expect_argument_error([] { maskattn::segments_from_lengths({1}, -1); }, "L", "given -1");

  expect_argument_error([] { maskattn::from_key_padding_mask(nullptr, 3); }, "ignore", "null");
}

// ------------------------------------------------------------ built masks == compact rules

TEST(Masks, CausalMaskEqualsCausalOption) {
  Rng rng("Masks/causal");
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{5, 5}, {3, 9}, {9, 3}, {17, 33}, {1, 65}, {64, 64}, {33, 16}};
  for (auto [Lq, Lk] : shapes) {
    Problem p(rng, 2, 4, 2, Lq, Lk, 16);
    for (Align align : {Align::bottom_right, Align::top_left}) {
      const std::vector<uint8_t> mask = maskattn::create_causal_mask(Lq, Lk, align);
      const std::vector<float> bias = maskattn::to_additive_mask(mask);
      for (Target t : targets()) {
        const std::string what = std::string("causal ") + std::to_string(Lq) + "x" + std::to_string(Lk) + " " +
                                 align_name(align) + " on " + maskattn_test::target_label(t);
        maskattn::Options rule;
        rule.causal = true;
        rule.align = align;
        maskattn::Options dense;
        dense.allowed = maskattn::make_mask(mask.data(), 1, 1, Lq, Lk, static_cast<int64_t>(mask.size()));
        maskattn::Options additive;
        additive.bias = maskattn::make_mask(bias.data(), 1, 1, Lq, Lk, static_cast<int64_t>(bias.size()));
        const std::vector<float> expected = p.run(rule, t);
        expect_same(p.run(dense, t), expected, what + " (allowed)");
        expect_same(p.run(additive, t), expected, what + " (additive bias)");
      }
    }
  }
}

TEST(Masks, PaddingMaskEqualsKeyLengths) {
  Rng rng("Masks/padding");
  for (int64_t Lk : {1, 7, 16, 33, 129}) {
    const std::vector<int32_t> lengths = {0, static_cast<int32_t>(Lk), static_cast<int32_t>(Lk / 2), 1};
    Problem p(rng, 4, 2, 1, 5, Lk, 8);
    const std::vector<uint8_t> mask = maskattn::create_padding_mask(lengths, Lk);
    // The same mask in PyTorch polarity, converted back.
    std::vector<uint8_t> ignore(mask.size());
    for (size_t i = 0; i < mask.size(); ++i) ignore[i] = mask[i] ? 0 : 1;
    const std::vector<uint8_t> converted = maskattn::from_key_padding_mask(ignore);
    ASSERT_EQ(converted, mask);
    const std::vector<float> bias = maskattn::to_additive_mask(mask);
    for (Target t : targets()) {
      const std::string what = "padding Lk=" + std::to_string(Lk) + " on " + maskattn_test::target_label(t);
      maskattn::Options rule;
      rule.key_lengths = lengths;
      maskattn::Options dense;
      dense.allowed = maskattn::make_mask(converted.data(), 4, 1, 1, Lk, static_cast<int64_t>(converted.size()));
      maskattn::Options additive;
      additive.bias = maskattn::make_mask(bias.data(), 4, 1, 1, Lk, static_cast<int64_t>(bias.size()));
      const std::vector<float> expected = p.run(rule, t);
      expect_same(p.run(dense, t), expected, what + " (allowed)");
      expect_same(p.run(additive, t), expected, what + " (additive bias)");
    }
  }
}

TEST(Masks, WindowMaskEqualsWindowOption) {
  Rng rng("Masks/window");
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{8, 8}, {4, 19}, {19, 4}, {65, 65}, {1, 40}};
  const std::vector<std::pair<int64_t, int64_t>> windows = {{0, 0}, {2, 0}, {0, 3}, {-1, 2}, {5, -1}, {-1, -1}, {16, 16}};
  for (auto [Lq, Lk] : shapes) {
    Problem p(rng, 1, 2, 2, Lq, Lk, 8);
    for (auto [left, right] : windows)
      for (Align align : {Align::bottom_right, Align::top_left}) {
        const std::vector<uint8_t> mask = maskattn::create_window_mask(Lq, Lk, left, right, align);
        for (Target t : targets()) {
          const std::string what = "window (" + std::to_string(left) + "," + std::to_string(right) + ") " +
                                   std::to_string(Lq) + "x" + std::to_string(Lk) + " " + align_name(align) + " on " +
                                   maskattn_test::target_label(t);
          maskattn::Options rule;
          rule.window = {left, right};
          rule.align = align;
          maskattn::Options dense;
          dense.allowed = maskattn::make_mask(mask.data(), 1, 1, Lq, Lk, static_cast<int64_t>(mask.size()));
          expect_same(p.run(dense, t), p.run(rule, t), what);
        }
      }
  }
}

TEST(Masks, SegmentsFromLengthsEqualBlockDiagonalMask) {
  Rng rng("Masks/segments");
  const std::vector<int32_t> docs = {3, 0, 5, 2, 7};
  const int64_t L = 21;  // 17 tokens of documents, 4 of padding
  const int32_t used = 17;
  const std::vector<int32_t> seg = maskattn::segments_from_lengths(docs, L);
  Problem p(rng, 1, 2, 1, L, L, 8);
  // Each document attends only itself; with the lengths, the padding tail attends nothing.
  std::vector<uint8_t> block(static_cast<size_t>(L * L), 0);
  std::vector<uint8_t> same_id(static_cast<size_t>(L * L), 0);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) {
      same_id[i * L + j] = seg[i] == seg[j];
      block[i * L + j] = seg[i] == seg[j] && seg[i] >= 0;
    }
  const std::vector<int32_t> lengths = {used};
  for (Target t : targets()) {
    const std::string on = std::string(" on ") + maskattn_test::target_label(t);
    maskattn::Options rule;
    rule.query_segments = seg;
    rule.key_segments = seg;
    rule.key_lengths = lengths;
    rule.query_lengths = lengths;
    maskattn::Options dense;
    dense.allowed = maskattn::make_mask(block.data(), 1, 1, L, L, L * L);
    expect_same(p.run(dense, t), p.run(rule, t), "segments + lengths" + on);
    // Segments alone: the tail's -1 ids match each other (documented in masks.hpp).
    maskattn::Options ids_only;
    ids_only.query_segments = seg;
    ids_only.key_segments = seg;
    maskattn::Options dense_ids;
    dense_ids.allowed = maskattn::make_mask(same_id.data(), 1, 1, L, L, L * L);
    expect_same(p.run(dense_ids, t), p.run(ids_only, t), "segments only" + on);
    // Combined with causal: a packed causal LM batch.
    std::vector<uint8_t> causal_block = maskattn::create_causal_mask(L, L);
    for (size_t i = 0; i < causal_block.size(); ++i) causal_block[i] &= block[i];
    rule.causal = true;
    maskattn::Options dense_causal;
    dense_causal.allowed = maskattn::make_mask(causal_block.data(), 1, 1, L, L, L * L);
    expect_same(p.run(dense_causal, t), p.run(rule, t), "segments + lengths + causal" + on);
  }
}

}  // namespace
