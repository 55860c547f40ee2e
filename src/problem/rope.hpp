// Rotary position embedding (RoPE) for the library's entry points: attention() rotates Q and K into
// per-call copies before the kernels run, a KV cache rotates keys as it stores them and each query
// row in attend(). The kernels never see RoPE. The reference has its own code (reference.cpp).
//
// Angles: inv_freq[i] = theta^(-2i/dims) once per call, in double; for a position p the angle
// p · inv_freq[i] is formed in double (p up to 2^32: float's error would grow with p), then cos and
// sin in double, and each pair is rotated in double and rounded to float once.
// Semantics: docs/semantics.md, "Rotary position embedding (RoPE)".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "problem/problem.hpp"
#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

// The largest offset: the largest position (int32, as a window cache counts); positions stay exact
// in double and in int64.
constexpr int64_t kMaxRopeOffset = kMaxRingLength;
// A bound on |position + offset| at which an angle is formed: positions are int32 (a window cache
// counts on to 2^31 - 1; attention()'s queries sit at most Lq below 0), offsets below 2^31.
constexpr double kMaxRopePosition = 4294967296.0;  // 2^32

// inv_freq[i] = theta^(-2i/dims), as RopeRotation and the reference form it.
inline double rope_inv_freq(double theta, int64_t i, int64_t dims) {
  return std::pow(theta, -2.0 * double(i) / double(dims));
}

// Whether a scaling's frequencies follow the sequence's length (dynamic NTK's base, LongRoPE's
// short/long factors): a cache's appends and attends then pass the length they are at.
inline bool rope_length_dependent(const Rope& r) {
  return r.scaling.type == RopeScalingType::dynamic || r.scaling.type == RopeScalingType::longrope;
}

// YaRN's and LongRoPE's default attention factors (the published definitions).
inline double yarn_mscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }
inline double longrope_attention(double factor, int64_t original) {
  return factor <= 1 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(double(original)));
}

// The frequencies of a validated Rope (dims resolved) for a sequence of `length` positions (offset
// included), into inv[dims/2], and the factor its rotated pairs are scaled by: Hugging Face's
// rope_scaling types as the Llama 3.1 release, the YaRN and LongRoPE papers define them, in double.
// The reference forms them again, independently (reference.cpp).
inline double rope_scaled_frequencies(const Rope& r, int64_t length, double* inv) {
  const RopeScaling& s = r.scaling;
  const int64_t half = r.dims / 2;
  const double orig = double(s.original_max_positions);
  double theta = r.theta;
  if (s.type == RopeScalingType::dynamic && double(length) > orig)  // NTK-aware: a larger base past orig
    theta *= std::pow(s.factor * double(length) / orig - (s.factor - 1.0), double(r.dims) / double(r.dims - 2));
  for (int64_t i = 0; i < half; ++i) inv[i] = rope_inv_freq(theta, i, r.dims);
  switch (s.type) {
    case RopeScalingType::none:
    case RopeScalingType::dynamic:
      return 1.0;
    case RopeScalingType::linear:
      for (int64_t i = 0; i < half; ++i) inv[i] /= s.factor;
      return 1.0;
    case RopeScalingType::llama3: {
      // Wavelengths above orig / low are divided by factor, below orig / high kept, ramped between.
      const double low_wavelen = orig / s.low_freq_factor, high_wavelen = orig / s.high_freq_factor;
      for (int64_t i = 0; i < half; ++i) {
        const double wavelen = 2.0 * M_PI / inv[i];
        if (wavelen > low_wavelen) {
          inv[i] /= s.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          inv[i] = (1.0 - smooth) * inv[i] / s.factor + smooth * inv[i];
        }
      }
      return 1.0;
    }
    case RopeScalingType::yarn: {
      // Pairs completing fewer than beta_slow rotations over orig positions interpolate (/ factor),
      // more than beta_fast extrapolate (kept), linearly between (in pair index, ends rounded out).
      auto correction_dim = [&](double rotations) {
        return double(r.dims) * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
      };
      const double lo = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
      double hi = std::min(std::ceil(correction_dim(s.beta_slow)), double(r.dims - 1));
      if (lo == hi) hi += 0.001;
      for (int64_t i = 0; i < half; ++i) {
        const double ramp = std::min(std::max((double(i) - lo) / (hi - lo), 0.0), 1.0);
        const double extrapolation = 1.0 - ramp;
        inv[i] = inv[i] / s.factor * (1.0 - extrapolation) + inv[i] * extrapolation;
      }
      if (s.attention_factor) return *s.attention_factor;
      if (s.mscale && *s.mscale != 0 && s.mscale_all_dim && *s.mscale_all_dim != 0)
        return yarn_mscale(s.factor, *s.mscale) / yarn_mscale(s.factor, *s.mscale_all_dim);
      return yarn_mscale(s.factor, 1.0);
    }
    case RopeScalingType::longrope: {
      const std::vector<double>& ext = double(length) > orig ? s.long_factor : s.short_factor;
      for (int64_t i = 0; i < half; ++i) inv[i] /= ext[size_t(i)];
      return s.attention_factor ? *s.attention_factor : longrope_attention(s.factor > 0 ? s.factor : 1.0, s.original_max_positions);
    }
    case RopeScalingType::factors:
      for (int64_t i = 0; i < half; ++i) inv[i] /= s.freq_factors[size_t(i)];
      return s.attention_factor ? *s.attention_factor : 1.0;
  }
  return 1.0;
}

// Checks a Rope for head dim D (errors name "<name>.theta", ...) and returns it with dims resolved
// (problem/validate_rope.cpp, with the validator's other checks).
Rope check_rope(const Rope& r, int64_t D, const std::string& name);
// What maskattn::rope_frequencies answers: a Rope checked for D, its frequencies at `length`.
RopeFrequencies checked_rope_frequencies(const Rope& r, int64_t D, int64_t length, const std::string& name);

// out's rotated pairs: (x, y) of `in` (interleaved: adjacent; halves: i and i + half) turned by the
// angle whose cos and sin are c[i], s[i], in double, times `scale`, rounded to float once. out may
// be in. Out of line (rope.cpp), where x86-64 also has an AVX2 copy that it calls where the CPU has AVX2.
void rope_rotate_pairs(RopeLayout layout, const float* in, float* out, const double* c, const double* s, int64_t half,
                       double scale);

// A validated Rope's frequencies, and the rotation of float rows at a position.
class RopeRotation {
 public:
  explicit RopeRotation(const Rope& r) : rope_(r), half_(r.dims / 2), inv_freq_(size_t(half_)), cos_(size_t(half_)),
                                          sin_(size_t(half_)) {
    scale_ = rope_scaled_frequencies(r, 0, inv_freq_.data());
  }
  // A rotation with given frequencies (without_runs).
  RopeRotation(const Rope& r, const std::vector<double>& inv_freq, double scale, int64_t length)
      : rope_(r), half_(r.dims / 2), scale_(scale), length_(length), inv_freq_(inv_freq), cos_(size_t(half_)),
        sin_(size_t(half_)) {}
  // The sequence's length (positions + offset) the frequencies are for: dynamic NTK and LongRoPE
  // change with it (rope_length_dependent); the others ignore it. In place: no allocation, so an
  // append that prepared its runs cannot fail part-way.
  void set_length(int64_t length) {
    if (!rope_length_dependent(rope_) || length == length_) return;
    length_ = length;
    scale_ = rope_scaled_frequencies(rope_, length, inv_freq_.data());
    pos_ = INT64_MIN;
    run_valid_ = false;  // its start's angles were of the old frequencies
    fill_steps(0, steps_);
  }
  // cos and sin of every pair's angle at position pos (offset not included).
  void at(int64_t pos) {
    if (pos == pos_) return;
    pos_ = pos;
    for (int64_t i = 0; i < half_; ++i) {
      const double a = double(pos) * inv_freq_[size_t(i)];
      cos_[size_t(i)] = std::cos(a);
      sin_[size_t(i)] = std::sin(a);
    }
  }
  // cos and sin of the turn from position `from` to `to` (offset added to both): the difference of
  // the two angles at() forms, so a row stored rotated at `from` ends at exactly `to`'s angle (a
  // turn by at(to - from) is off by the rounding of the angles, which for a base below 1 can be
  // many radians).
  void between(int64_t from, int64_t to) {
    pos_ = INT64_MIN;
    for (int64_t i = 0; i < half_; ++i) {
      const double f = double(from + rope_.offset) * inv_freq_[size_t(i)], t = double(to + rope_.offset) * inv_freq_[size_t(i)];
      const double cf = std::cos(f), sf = std::sin(f), ct = std::cos(t), st = std::sin(t);
      cos_[size_t(i)] = ct * cf + st * sf;
      sin_[size_t(i)] = st * cf - ct * sf;
    }
  }
  // Runs of consecutive positions (K in attention(), a prompt's rows): start_run(pos) is at(pos);
  // step_run(r), 0 < r < kRun, gives position pos + r by the angle-addition formulas with a table of
  // cos and sin of r · inv_freq (in double: about 1e-16 off, far below float's rounding), so n
  // positions cost n / kRun + kRun cos/sin pairs per frequency instead of n.
  // The sum of two rounded angles is off from the rounded angle at pos + r by up to 1.5 ulp of the
  // angle: below 2^24 radians that is < 6e-9, beyond it (a base below 1, positions or offsets past
  // 2^24) it grows to radians. Frequencies whose angles in a run reach kExactAngle are therefore
  // formed at every position, as at() and the reference form them.
  static constexpr int64_t kRun = 64;
  static constexpr double kExactAngle = 16777216.0;  // 2^24
  void start_run(int64_t pos) {
    at(pos);
    run_valid_ = true;
    run_cos_ = cos_;  // no allocation once prepare_runs() sized them
    run_sin_ = sin_;
    run_pos_ = pos;
    n_exact_ = 0;
    const double far = double(std::max(std::abs(pos), std::abs(pos + kRun - 1)));
    for (int64_t i = 0; i < int64_t(exact_.size()); ++i)
      if (far * inv_freq_[size_t(i)] >= kExactAngle) exact_[size_t(n_exact_++)] = i;
  }
  // Makes step_run's table for steps r < `steps` (at most kRun): runs of n positions need n. Callers
  // that must not fail half-way (an append writes nothing unless it writes everything) call it
  // before they write; a single position needs none (one token's append costs no table).
  void prepare_runs(int64_t steps) {
    steps = std::min(steps, kRun);
    if (steps <= steps_ || half_ == 0) return;
    run_cos_.resize(size_t(half_));
    run_sin_.resize(size_t(half_));
    exact_.resize(size_t(half_));
    step_cos_.resize(size_t(steps * half_));
    step_sin_.resize(size_t(steps * half_));
    fill_steps(steps_, steps);
    steps_ = steps;
  }
  void step_run(int64_t r) {  // r < the steps prepared
    pos_ = INT64_MIN;  // cos_ and sin_ no longer hold at()'s position (at_in_run records its own)
    const double* dc = step_cos_.data() + r * half_;
    const double* ds = step_sin_.data() + r * half_;
    for (int64_t i = 0; i < half_; ++i) {
      const double c = run_cos_[size_t(i)], s = run_sin_[size_t(i)];
      cos_[size_t(i)] = c * dc[i] - s * ds[i];
      sin_[size_t(i)] = s * dc[i] + c * ds[i];
    }
    for (int64_t n = 0; n < n_exact_; ++n) {
      const size_t i = size_t(exact_[size_t(n)]);
      const double a = double(run_pos_ + r) * inv_freq_[i];
      cos_[i] = std::cos(a);
      sin_[i] = std::sin(a);
    }
  }
  // The angles at position pos for rows written one position after another (a cache's appends,
  // token by token): stepped from the current run's exact start while pos is within its table,
  // else a new run starting exactly at pos, so a token costs a few multiplies per pair instead of a
  // cos and a sin (the same 1.5-ulp rule as runs). Needs prepare_runs(kRun) once; no allocation.
  void at_in_run(int64_t pos) {
    if (pos == pos_) return;
    if (run_valid_ && pos > run_pos_ && pos - run_pos_ < steps_) {
      step_run(pos - run_pos_);
      pos_ = pos;  // (stepped angles: a query at this position, in attend, takes them as they are)
    } else {
      start_run(pos);
    }
  }
  // A copy with the frequencies and the current angles but not the run tables (a query's rotation
  // in attend: a position or two, no tables to copy).
  RopeRotation without_runs() const {
    RopeRotation r(rope_, inv_freq_, scale_, length_);
    r.cos_ = cos_;
    r.sin_ = sin_;
    r.pos_ = pos_;
    return r;
  }

  // out = the row rotated at the last at() position, its rotated pairs times the scaling's attention
  // factor (scaled = false: a turn alone, for rows stored rotated already); D - dims trailing
  // elements copied unscaled. out may be in.
  void rotate(const float* in, float* out, int64_t D, bool scaled = true) const {
    rope_rotate_pairs(rope_.layout, in, out, cos_.data(), sin_.data(), half_, scaled ? scale_ : 1.0);
    if (out != in)
      for (int64_t d = rope_.dims; d < D; ++d) out[d] = in[d];
  }
  int64_t offset() const { return rope_.offset; }
  const Rope& rope() const { return rope_; }

 private:
  Rope rope_;
  int64_t half_;
  double scale_ = 1.0;     // the scaling's attention factor
  int64_t length_ = 0;     // the length the frequencies are for (set_length)
  std::vector<double> inv_freq_, cos_, sin_;
  std::vector<double> run_cos_, run_sin_, step_cos_, step_sin_;  // start_run / step_run
  std::vector<int64_t> exact_;                                    // the run's frequencies formed at each position
  int64_t n_exact_ = 0, run_pos_ = 0;
  bool run_valid_ = false;  // run_pos_'s angles are in run_cos_ / run_sin_

  // cos and sin of k · inv_freq for the step table's rows [from, to) (sized already).
  void fill_steps(int64_t from, int64_t to) {
    for (int64_t k = from; k < to; ++k)
      for (int64_t i = 0; i < half_; ++i) {
        const double a = double(k) * inv_freq_[size_t(i)];
        step_cos_[size_t(k * half_ + i)] = std::cos(a);
        step_sin_[size_t(k * half_ + i)] = std::sin(a);
      }
  }
  int64_t steps_ = 0;                                             // rows of the step table
  int64_t pos_ = INT64_MIN;
};

// A contiguous [B, H, L, D] copy of a view (base pointer and element strides of B, H, L), each row
// (b, h, l) rotated at position first(b) + l + offset. Loops over positions outside the heads, so
// the angles are computed once per position (by runs: start_run / step_run).
// `proto`, when given, is r's rotation made earlier (a cache keeps one: no pow per call).
template <class First>
void rope_copy(const Rope& r, const float* src, int64_t sb, int64_t sh, int64_t sl, int64_t B, int64_t H,
               int64_t L, int64_t D, First first, float* dst, const RopeRotation* proto = nullptr) {
  RopeRotation rot = proto ? proto->without_runs() : RopeRotation(r);
  if (L > 1) rot.prepare_runs(L);  // one position per sequence (a decode step) needs no step table
  for (int64_t b = 0; b < B; ++b) {
    rot.set_length(first(b) + L + r.offset);  // the sequence's length: its last row's position + 1
    for (int64_t l = 0; l < L; ++l) {
      if (l % RopeRotation::kRun == 0) rot.start_run(first(b) + l + r.offset);
      else rot.step_run(l % RopeRotation::kRun);
      for (int64_t h = 0; h < H; ++h) rot.rotate(src + b * sb + h * sh + l * sl, dst + ((b * H + h) * L + l) * D, D);
    }
  }
}

// Before the kernels run: Q (and K when p.rope_keys) replaced by rotated contiguous copies held in
// the given buffers (O(Lq·D) work per head; K, in attention() only, O(Lk·D)), and p.rope cleared.
// The buffers are left uninitialised (every element is written): no pass to zero them. A cache's
// frequencies (p.kv.rope) are reused: no pow per call.
inline void apply_rope(Problem& p, std::unique_ptr<float[]>& q_buf, std::unique_ptr<float[]>& k_buf) {
  if (!p.rope) return;
  const Rope r = *p.rope;
  const RopeRotation* proto = p.kv.rope;
  p.rope.reset();
  if (p.B > 0 && p.Hq > 0 && p.Lq > 0 && p.D > 0) {
    q_buf.reset(new float[size_t(p.B * p.Hq * p.Lq * p.D)]);
    rope_copy(r, p.q, p.qs.b, p.qs.h, p.qs.l, p.B, p.Hq, p.Lq, p.D,
              [&](int64_t b) { return p.rope_q_position(b, 0); }, q_buf.get(), proto);
    p.q = q_buf.get();
    p.qs = {p.Hq * p.Lq * p.D, p.Lq * p.D, p.D};
  }
  if (p.rope_keys && p.kv.k && p.B > 0 && p.Hkv > 0 && p.Lk > 0 && p.D > 0) {  // dense float K (attention())
    const RowMajor3 ks = p.kv.ks;
    k_buf.reset(new float[size_t(p.B * p.Hkv * p.Lk * p.D)]);
    rope_copy(r, static_cast<const float*>(p.kv.k), ks.b, ks.h, ks.l, p.B, p.Hkv, p.Lk, p.D,
              [](int64_t) { return int64_t(0); }, k_buf.get(), proto);
    p.kv.k = k_buf.get();
    p.kv.ks = {p.Hkv * p.Lk * p.D, p.Lk * p.D, p.D};
  }
}

}  // namespace maskattn::detail
