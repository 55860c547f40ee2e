// RoPE's checks (Options::rope, a cache's config.rope, rope_frequencies()): the theta, dims, layout,
// offset and scaling fields, and what they derive (frequencies and the attention factor) at the
// positions a call may reach, with errors that name the field. The rotation is rope.hpp's.
#include <cmath>
#include <iomanip>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "problem/rope.hpp"

namespace maskattn::detail {
namespace {

// Checks r.scaling for a Rope of `dims` rotated dimensions (errors name "<name>.scaling.<field>").
void check_rope_scaling(const Rope& r, int64_t dims, const std::string& name) {
  const RopeScaling& s = r.scaling;
  const std::string at = name + ".scaling.";
  using T = RopeScalingType;
  auto positive = [&](double x, const char* field) {
    if (!std::isfinite(x) || !(x > 0)) fail(at + field, cat("must be finite and > 0, given ", x));
  };
  auto divisors = [&](const std::vector<double>& v, const char* field) {
    if (int64_t(v.size()) != dims / 2)
      fail(at + field, cat("needs one divisor per rotated pair: dims / 2 = ", dims / 2, ", given ", v.size()));
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]) || !(v[i] > 0)) fail(cat(at, field, "[", i, "]"), cat("must be finite and > 0, given ", v[i]));
  };
  switch (s.type) {
    case T::none:
      return;
    case T::linear: case T::dynamic: case T::llama3: case T::yarn:
      positive(s.factor, "factor");
      break;
    case T::longrope:
      if (s.factor != 0) positive(s.factor, "factor");
      break;
    case T::factors:
      divisors(s.freq_factors, "freq_factors");
      break;
    default:
      fail_type(at + "type", cat("must be none, linear, dynamic, llama3, yarn, longrope or factors, given ", int(s.type)));
  }
  const bool needs_original = s.type == T::dynamic || s.type == T::llama3 || s.type == T::yarn || s.type == T::longrope;
  if (needs_original && (s.original_max_positions < 1 || s.original_max_positions > kMaxRopeOffset))
    fail(at + "original_max_positions", cat("must be an integer in [1, ", kMaxRopeOffset, "] (the context the model was trained on), given ",
                                            s.original_max_positions));
  if (s.type == T::dynamic && dims <= 2)
    fail(name + ".dims", cat("must be > 2 for dynamic scaling (its base grows as (...)^(dims / (dims - 2))), given ", dims));
  if (s.type == T::llama3) {
    positive(s.low_freq_factor, "low_freq_factor");
    positive(s.high_freq_factor, "high_freq_factor");
    if (!(s.high_freq_factor > s.low_freq_factor))
      fail(at + "high_freq_factor", cat("must be > low_freq_factor = ", s.low_freq_factor, ", given ", s.high_freq_factor));
  }
  if (s.type == T::yarn) {
    positive(s.beta_fast, "beta_fast");
    positive(s.beta_slow, "beta_slow");
    if (s.mscale && !std::isfinite(*s.mscale)) fail(at + "mscale", cat("must be finite, given ", *s.mscale));
    if (s.mscale_all_dim && !std::isfinite(*s.mscale_all_dim))
      fail(at + "mscale_all_dim", cat("must be finite, given ", *s.mscale_all_dim));
  }
  if (s.type == T::longrope) {
    divisors(s.short_factor, "short_factor");
    divisors(s.long_factor, "long_factor");
  }
  if (s.attention_factor) positive(*s.attention_factor, "attention_factor");
}

}  // namespace

// Checks a Rope for head dim D (errors name "<name>.theta", ...) and returns it with dims resolved.
Rope check_rope(const Rope& r, int64_t D, const std::string& name) {
  if (!std::isfinite(r.theta) || !(r.theta > 0))
    fail(name + ".theta", cat("must be finite and > 0 (the base, 10000 in Llama 2), given ", r.theta));
  if (r.dims < 0 || r.dims > D)
    fail(name + ".dims", cat("must be in [0, D = ", D, "] (0 = all of D), given ", r.dims));
  const int64_t dims = r.dims == 0 ? D : r.dims;
  if (dims % 2 != 0)
    fail(name + ".dims", r.dims == 0 ? cat("rotates pairs: it must be even; D = ", D, " is odd, so give an even dims")
                                     : cat("rotates pairs: it must be even, given ", r.dims));
  if (r.layout != RopeLayout::halves && r.layout != RopeLayout::interleaved)
    fail_type(name + ".layout", cat("must be halves or interleaved, given ", int(r.layout)));
  if (r.offset < 0 || r.offset > kMaxRopeOffset)
    fail(name + ".offset", cat("must be an integer in [0, ", kMaxRopeOffset, "], given ", r.offset));
  check_rope_scaling(r, dims, name);
  // A base below 1 makes inv_freq grow with i, up to theta^(-(dims-2)/dims) at the last pair: for a
  // subnormal or tiny base that or its angles overflow double (from dims 28 on for 5e-324), and
  // even position 0's angle would be 0 x inf = NaN. So the last pair's frequency times 2^32 (every
  // angle's bound) must be finite; a base >= 1 gives frequencies <= 1.
  const double top = dims >= 2 ? rope_inv_freq(r.theta, dims / 2 - 1, dims) : 1.0;
  if (!std::isfinite(top * kMaxRopePosition))
    fail(name + ".theta", cat("is too small for dims = ", dims, ": the last pair's frequency theta^(-", dims - 2, "/",
                              dims, ") = ", top, " times positions up to 2^32 overflows float64 (accepted: theta >= about ",
                              std::exp(std::log(kMaxRopePosition / std::numeric_limits<double>::max()) * double(dims) /
                                       double(dims - 2)),
                              " at this dims, any theta >= 2.4e-299 at every dims), given ", std::setprecision(17),
                              r.theta));
  Rope out = r;
  out.dims = dims;
  // The scaled frequencies and attention factor, derived: at a short sequence and, when they follow
  // the length, at the longest (2^32): every angle finite, the factor finite and > 0.
  if (r.scaling.type != RopeScalingType::none) {
    std::vector<double> inv(size_t(dims / 2));
    for (int64_t length : {int64_t(0), int64_t(kMaxRopePosition)}) {
      const double af = rope_scaled_frequencies(out, length, inv.data());
      if (!std::isfinite(af) || !(af > 0))
        fail(name + ".scaling", cat("gives an attention factor of ", af, " (its fields make the rotated pairs' scale ",
                                    "non-finite or <= 0; with yarn, check mscale / mscale_all_dim)"));
      // Q and K are both scaled, so the logits by af^2: past sqrt(FLT_MAX) a unit q·k is already
      // beyond float32 (every row NaN where the float64 reference stays finite).
      constexpr double kMaxAttention = 1.8446744073709552e19;  // 2^64 < sqrt(FLT_MAX)
      if (af > kMaxAttention)
        fail(r.scaling.attention_factor ? name + ".scaling.attention_factor" : name + ".scaling",
             cat("gives an attention factor of ", af, ": the logits grow by its square, past float32's range for a unit ",
                 "q·k above 2^64; given fields that make it so"));
      for (size_t i = 0; i < inv.size(); ++i)
        if (!std::isfinite(inv[i] * kMaxRopePosition) || !(inv[i] >= 0))
          fail(name + ".scaling", cat("makes pair ", i, "'s frequency ", inv[i], " (times positions up to 2^32) not finite",
                                      length ? " past original_max_positions" : ""));
      if (!rope_length_dependent(out)) break;
    }
  }
  return out;
}

// What maskattn::rope_frequencies answers: a Rope checked for D, its frequencies at `length`.
RopeFrequencies checked_rope_frequencies(const Rope& r, int64_t D, int64_t length, const std::string& name) {
  const Rope c = check_rope(r, D, name);
  if (length < 0 || double(length) > kMaxRopePosition)
    fail("length", cat("must be in [0, 2^32] (positions + offset), given ", length));
  RopeFrequencies f;
  f.inv_freq.resize(size_t(c.dims / 2));
  f.attention_factor = rope_scaled_frequencies(c, length, f.inv_freq.data());
  return f;
}

}  // namespace maskattn::detail
