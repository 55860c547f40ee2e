// merge_attention: partial results over disjoint key sets, merged, equal the float64 reference over
// their union (docs/semantics.md, "Merging partial results"): two and three parts, a part that
// attends nothing for some rows, rows nobody attends, NaN, cascade attention (a shared prefix
// attended once for several sequences plus each one's suffix), in place, and named errors.
#include <cmath>
#include <limits>
#include <vector>

#include "test_support.hpp"

namespace {

using maskattn::AttentionPart;
using maskattn::Span;
using maskattn_test::Rng;

struct Partial {
  std::vector<float> out, lse;
};

// attention() over keys [j0, j1) of k/v [B, H, Lk, D] (a copy of that slice), with its lse.
Partial attend_slice(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int64_t B,
                     int64_t H, int64_t L, int64_t Lk, int64_t D, int64_t j0, int64_t j1, maskattn::Options o = {}) {
  const int64_t n = j1 - j0;
  std::vector<float> ks(size_t(B * H * n * D)), vs(ks.size());
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < D; ++d) {
        ks[size_t((bh * n + j) * D + d)] = k[size_t((bh * Lk + j0 + j) * D + d)];
        vs[size_t((bh * n + j) * D + d)] = v[size_t((bh * Lk + j0 + j) * D + d)];
      }
  Partial p;
  p.out.assign(size_t(B * H * L * D), 0.0f);
  p.lse.assign(size_t(B * H * L), 0.0f);
  maskattn::ExtraOutputs extra;
  extra.lse = p.lse.data();
  maskattn::attention(maskattn::bhld(q.data(), B, H, L, D), maskattn::bhld(ks.data(), B, H, n, D),
                      maskattn::bhld(vs.data(), B, H, n, D), maskattn::bhld(p.out.data(), B, H, L, D), o, extra);
  return p;
}

std::vector<float> random(Rng& rng, size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform(-1, 1);
  return x;
}

TEST(Merge, PartsOverDisjointKeysEqualTheUnion) {
  Rng rng("merge/union");
  const int64_t B = 2, H = 3, L = 5, Lk = 70, D = 16;
  const std::vector<float> q = random(rng, size_t(B * H * L * D)), k = random(rng, size_t(B * H * Lk * D)),
                           v = random(rng, size_t(B * H * Lk * D));
  const maskattn::ReferenceResult ref = maskattn::reference_attention(
      maskattn::bhld(q.data(), B, H, L, D), maskattn::bhld(k.data(), B, H, Lk, D), maskattn::bhld(v.data(), B, H, Lk, D), {},
      maskattn::Precision::fp64);
  for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{0, 30, 70}, std::vector<int64_t>{0, 1, 45, 70}}) {
    std::vector<Partial> parts;
    for (size_t c = 0; c + 1 < cuts.size(); ++c) parts.push_back(attend_slice(q, k, v, B, H, L, Lk, D, cuts[c], cuts[c + 1]));
    std::vector<AttentionPart> views;
    for (const Partial& p : parts) views.push_back({maskattn::bhld(p.out.data(), B, H, L, D), p.lse.data()});
    std::vector<float> out(size_t(B * H * L * D), -7.0f), lse(size_t(B * H * L), -7.0f);
    maskattn::merge_attention(views, maskattn::bhld(out.data(), B, H, L, D), lse.data());
    for (size_t n = 0; n < out.size(); ++n) ASSERT_NEAR(out[n], ref.out[n], 2e-6) << n;
    for (size_t n = 0; n < lse.size(); ++n) ASSERT_NEAR(lse[n], ref.lse[n], 4e-6) << n;
    // In place: the first part's buffer receives the result.
    maskattn::merge_attention(views, maskattn::bhld(parts[0].out.data(), B, H, L, D), nullptr);
    for (size_t n = 0; n < out.size(); ++n) ASSERT_EQ(parts[0].out[n], out[n]) << n;
  }
}

TEST(Merge, PartsThatAttendNothingContributeNothing) {
  Rng rng("merge/empty");
  const int64_t B = 2, H = 1, L = 3, Lk = 40, D = 8;
  const std::vector<float> q = random(rng, size_t(B * H * L * D)), k = random(rng, size_t(B * H * Lk * D)),
                           v = random(rng, size_t(B * H * Lk * D));
  // Part 2 lets sequence 0 attend nothing (key length 0); with the `nan` policy its output there is
  // NaN, and its lse -inf: merging must ignore it.
  maskattn::Options none;
  std::vector<int32_t> lengths = {0, 20};
  none.key_lengths = lengths;
  none.fully_masked = maskattn::FullyMasked::nan;
  Partial a = attend_slice(q, k, v, B, H, L, Lk, D, 0, 20), b = attend_slice(q, k, v, B, H, L, Lk, D, 20, 40, none);
  std::vector<AttentionPart> views = {{maskattn::bhld(a.out.data(), B, H, L, D), a.lse.data()},
                                      {maskattn::bhld(b.out.data(), B, H, L, D), b.lse.data()}};
  std::vector<float> out(size_t(B * H * L * D)), lse(size_t(B * H * L));
  maskattn::merge_attention(views, maskattn::bhld(out.data(), B, H, L, D), lse.data());
  for (int64_t n = 0; n < L * D; ++n) EXPECT_EQ(out[size_t(n)], a.out[size_t(n)]) << "sequence 0 is part 1 alone";
  for (int64_t n = 0; n < L; ++n) EXPECT_EQ(lse[size_t(n)], a.lse[size_t(n)]);
  // No part attends anything: O = 0, lse = -inf (never NaN), whatever the outputs hold.
  std::fill(a.lse.begin(), a.lse.end(), -std::numeric_limits<float>::infinity());
  std::fill(b.lse.begin(), b.lse.end(), -std::numeric_limits<float>::infinity());
  std::fill(a.out.begin(), a.out.end(), std::numeric_limits<float>::quiet_NaN());
  maskattn::merge_attention(views, maskattn::bhld(out.data(), B, H, L, D), lse.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  // A NaN lse makes its rows NaN.
  a.lse[1] = std::numeric_limits<float>::quiet_NaN();
  std::fill(a.out.begin(), a.out.end(), 0.5f);
  maskattn::merge_attention(views, maskattn::bhld(out.data(), B, H, L, D), lse.data());
  EXPECT_TRUE(std::isnan(out[size_t(1 * D)]));
  EXPECT_TRUE(std::isnan(lse[1]));
  EXPECT_EQ(out[0], 0.0f) << "other rows untouched by the NaN";
}

// Cascade attention: a prompt prefix shared by 3 sequences attended once (the three sequences'
// queries as one batch of 1 over the prefix), each sequence's own suffix separately, then merged.
TEST(Merge, CascadeAttentionOverASharedPrefix) {
  Rng rng("merge/cascade");
  const int64_t S = 3, H = 2, P = 50, T = 9, D = 16;
  const std::vector<float> kp = random(rng, size_t(H * P * D)), vp = random(rng, size_t(H * P * D));
  std::vector<std::vector<float>> ks, vs;
  for (int64_t s = 0; s < S; ++s) ks.push_back(random(rng, size_t(H * T * D))), vs.push_back(random(rng, size_t(H * T * D)));
  const std::vector<float> q = random(rng, size_t(S * H * D));  // one new query per sequence and head
  // The prefix once: S sequences' queries as S query rows of one batch, [1, H, S, D].
  std::vector<float> qrows(size_t(H * S * D));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) qrows[size_t((h * S + s) * D + d)] = q[size_t((s * H + h) * D + d)];
  std::vector<float> prefix_out(size_t(H * S * D)), prefix_lse(size_t(H * S));
  maskattn::ExtraOutputs extra;
  extra.lse = prefix_lse.data();
  maskattn::attention(maskattn::bhld(qrows.data(), 1, H, S, D), maskattn::bhld(kp.data(), 1, H, P, D),
                      maskattn::bhld(vp.data(), 1, H, P, D), maskattn::bhld(prefix_out.data(), 1, H, S, D), {}, extra);
  for (int64_t s = 0; s < S; ++s) {
    // The prefix's rows of this sequence, as [1, H, 1, D] (strides into the batch of S rows).
    maskattn::ConstTensor prefix_view = maskattn::bhld<const float>(prefix_out.data() + s * D, 1, H, 1, D);
    prefix_view.strides[1] = S * D;
    std::vector<float> lse_s(static_cast<size_t>(H));
    for (int64_t h = 0; h < H; ++h) lse_s[size_t(h)] = prefix_lse[size_t(h * S + s)];
    const std::vector<float> qs(q.begin() + s * H * D, q.begin() + (s + 1) * H * D);
    Partial suffix = attend_slice(qs, ks[size_t(s)], vs[size_t(s)], 1, H, 1, T, D, 0, T);
    std::vector<AttentionPart> views = {{prefix_view, lse_s.data()}, {maskattn::bhld(suffix.out.data(), 1, H, 1, D), suffix.lse.data()}};
    std::vector<float> out(size_t(H * D));
    maskattn::merge_attention(views, maskattn::bhld(out.data(), 1, H, 1, D));
    // Against the reference over [prefix, suffix] as one sequence.
    std::vector<float> kf(size_t(H * (P + T) * D)), vf(kf.size());
    for (int64_t h = 0; h < H; ++h) {
      std::copy_n(kp.begin() + h * P * D, P * D, kf.begin() + h * (P + T) * D);
      std::copy_n(vp.begin() + h * P * D, P * D, vf.begin() + h * (P + T) * D);
      std::copy_n(ks[size_t(s)].begin() + h * T * D, T * D, kf.begin() + (h * (P + T) + P) * D);
      std::copy_n(vs[size_t(s)].begin() + h * T * D, T * D, vf.begin() + (h * (P + T) + P) * D);
    }
    const maskattn::ReferenceResult ref = maskattn::reference_attention(
        maskattn::bhld(qs.data(), 1, H, 1, D), maskattn::bhld(kf.data(), 1, H, P + T, D),
        maskattn::bhld(vf.data(), 1, H, P + T, D), {}, maskattn::Precision::fp64);
    for (size_t n = 0; n < out.size(); ++n) ASSERT_NEAR(out[n], ref.out[n], 2e-6) << "sequence " << s << " element " << n;
  }
}

TEST(Merge, BadInputIsNamedAndWritesNothing) {
  std::vector<float> o1(2 * 3 * 4, 0.5f), o2(o1.size(), 0.25f), l1(2 * 3, 0.0f), out(o1.size(), -7.0f);
  const auto view = [](std::vector<float>& x, int64_t L) { return maskattn::bhld<const float>(x.data(), 1, 2, L, 4); };
  std::vector<AttentionPart> parts = {{view(o1, 3), l1.data()}, {view(o2, 3), l1.data()}};
  maskattn_test::expect_argument_error([&] { maskattn::merge_attention(Span<AttentionPart>(), maskattn::bhld(out.data(), 1, 2, 3, 4)); }, "parts");
  parts[1].output = maskattn::bhld<const float>(o2.data(), 1, 2, 2, 4);
  maskattn_test::expect_argument_error([&] { maskattn::merge_attention(parts, maskattn::bhld(out.data(), 1, 2, 3, 4)); }, "parts[1].output");
  parts[1] = {view(o2, 3), nullptr};
  maskattn_test::expect_argument_error([&] { maskattn::merge_attention(parts, maskattn::bhld(out.data(), 1, 2, 3, 4)); }, "parts[1].lse");
  parts[1] = {view(o2, 3), l1.data()};
  maskattn_test::expect_argument_error([&] { maskattn::merge_attention(parts, maskattn::bhld(out.data(), 1, 2, 2, 4)); }, "out");
  for (float x : out) EXPECT_EQ(x, -7.0f);
}

}  // namespace
