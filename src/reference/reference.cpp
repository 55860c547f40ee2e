// Naive attention straight from the contract (docs/semantics.md), one (i, j) pair at a time.
// Deliberately shares nothing with the kernel except the validated Problem: the mask rules are
// re-derived here per pair from their definitions, not from problem/row_keys.hpp's intervals.
#include <cmath>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "problem/problem.hpp"
#include "maskattn/reference.hpp"

namespace maskattn {
namespace detail {
namespace {

// Whether every rule lets query i of (b, h) attend key j (the bias is checked separately).
bool pair_allowed(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t qlen = p.query_length(b), klen = p.key_length(b);
  if (i >= qlen || j >= klen) return false;
  const int64_t d = p.top_left ? i : i + (klen - qlen);
  bool diagonal_ok = true;
  if (p.causal && j > d) diagonal_ok = false;
  if (p.window_left >= 0 && j < d - p.window_left) diagonal_ok = false;
  if (p.window_right >= 0 && j > d + p.window_right) diagonal_ok = false;
  if (j < p.prefix) diagonal_ok = true;  // prefix-LM: the prefix is always visible
  if (j < p.kv.sink_tokens && j <= d) diagonal_ok = true;  // a ring's sink tokens: visible up to the query
  if (!diagonal_ok) return false;
  if (p.query_segments && p.query_segments[b * p.Lq + i] != p.key_segments[b * p.Lk + j]) return false;
  if (p.tree_parents && j >= klen - p.Lq) {  // a tree node: only i's ancestors and i itself
    const int32_t* parent = p.tree_parents + (p.tree_per_batch ? b * p.Lq : 0);
    int64_t node = i;
    while (node >= 0 && node != j - (klen - p.Lq)) node = parent[node];
    if (node < 0) return false;
  }
  if (p.allowed) {
    const auto& a = p.allowed;
    if (!a.data[b * a.strides[0] + h * a.strides[1] + i * a.strides[2] + j * a.strides[3]]) return false;
  }
  return true;
}

// RoPE's frequencies straight from the published definitions of each scaling (Hugging Face's
// rope_scaling types: the Llama 3.1 release, the YaRN and LongRoPE papers), written again here,
// independently of problem/rope.hpp, for a sequence of `length` positions (+ offset).
struct Frequencies {
  std::vector<double> inv;  // pair i turns by (pos + offset) · inv[i]
  double attention = 1;     // the rotated pairs' scale
};
Frequencies frequencies(const Rope& r, int64_t length) {
  const RopeScaling& s = r.scaling;
  const int64_t pairs = r.dims / 2;
  const double orig = double(s.original_max_positions), pi = std::acos(-1.0);
  Frequencies f;
  double base = r.theta;
  if (s.type == RopeScalingType::dynamic) {  // the base as of max(length, orig) positions
    const double L = std::max(double(length), orig);
    base *= std::pow(s.factor * L / orig - (s.factor - 1), double(r.dims) / double(r.dims - 2));
  }
  // theta^(-2i/dims) as the definition writes it: for a base below 1 and angles of 2^31 positions,
  // any other rounding of the power moves an angle by whole turns.
  for (int64_t i = 0; i < pairs; ++i) f.inv.push_back(std::pow(base, -double(2 * i) / double(r.dims)));
  auto mscale = [](double factor, double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  // YaRN's ramp in pair index: from where a frequency completes beta_fast turns over orig positions
  // (rounded down) to where it completes beta_slow (rounded up).
  auto dim_at = [&](double rotations) { return r.dims * std::log(orig / (rotations * 2 * pi)) / (2 * std::log(base)); };
  double yarn_low = 0, yarn_high = 1;
  if (s.type == RopeScalingType::yarn) {
    yarn_low = std::max(0.0, std::floor(dim_at(s.beta_fast)));
    yarn_high = std::min(double(r.dims - 1), std::ceil(dim_at(s.beta_slow)));
    if (yarn_high == yarn_low) yarn_high += 0.001;  // the published ramp's guard against 0 / 0
  }
  for (int64_t i = 0; i < pairs; ++i) {
    double& x = f.inv[size_t(i)];
    switch (s.type) {
      case RopeScalingType::linear:
        x = x / s.factor;
        break;
      case RopeScalingType::llama3: {
        const double wavelen = 2 * pi / x;
        if (wavelen < orig / s.high_freq_factor) break;  // high frequency: kept
        if (wavelen > orig / s.low_freq_factor) {         // low frequency: interpolated
          x = x / s.factor;
          break;
        }
        const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1 - smooth) * x / s.factor + smooth * x;
        break;
      }
      case RopeScalingType::yarn: {
        const double ramp = std::clamp((double(i) - yarn_low) / (yarn_high - yarn_low), 0.0, 1.0);
        x = (x / s.factor) * ramp + x * (1 - ramp);  // interpolated by ramp, extrapolated by 1 - ramp
        break;
      }
      case RopeScalingType::longrope:
        x = x / (double(length) > orig ? s.long_factor : s.short_factor)[size_t(i)];
        break;
      case RopeScalingType::factors:
        x = x / s.freq_factors[size_t(i)];
        break;
      default:
        break;
    }
  }
  if (s.type == RopeScalingType::yarn) {
    if (s.attention_factor) f.attention = *s.attention_factor;
    else if (s.mscale.value_or(0) != 0 && s.mscale_all_dim.value_or(0) != 0)
      f.attention = mscale(s.factor, *s.mscale) / mscale(s.factor, *s.mscale_all_dim);
    else f.attention = mscale(s.factor, 1);
  } else if (s.type == RopeScalingType::longrope) {
    const double factor = s.factor > 0 ? s.factor : 1;
    f.attention = s.attention_factor ? *s.attention_factor
                  : factor <= 1      ? 1.0
                                     : std::sqrt(1 + std::log(factor) / std::log(orig));
  } else if (s.type == RopeScalingType::factors && s.attention_factor) {
    f.attention = *s.attention_factor;
  }
  return f;
}

// RoPE straight from its definition: pair i = (x, y) of a row at position pos becomes
// (x cos a - y sin a, x sin a + y cos a) · attention, a = (pos + offset) · inv[i], in double.
void rope_row(const Rope& r, const Frequencies& f, int64_t pos, const float* in, int64_t D, double* out) {
  for (int64_t d = 0; d < D; ++d) out[d] = in[d];
  const int64_t pairs = r.dims / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    const double a = double(pos + r.offset) * f.inv[size_t(i)];
    const int64_t xi = r.layout == RopeLayout::interleaved ? 2 * i : i;
    const int64_t yi = r.layout == RopeLayout::interleaved ? 2 * i + 1 : i + pairs;
    const double x = in[xi], y = in[yi];
    out[xi] = (x * std::cos(a) - y * std::sin(a)) * f.attention;
    out[yi] = (x * std::sin(a) + y * std::cos(a)) * f.attention;
  }
}

template <class Real>
void compute(const Problem& p, ReferenceResult& res) {
  const Real inf = std::numeric_limits<Real>::infinity();
  const Real nan = std::numeric_limits<Real>::quiet_NaN();
  res.out.assign(size_t(p.B * p.Hq * p.Lq * p.Dv), 0.0);
  res.weights.assign(size_t(p.B * p.Hq * p.Lq * p.Lk), 0.0);
  res.lse.assign(size_t(p.B * p.Hq * p.Lq), 0.0);
  res.fully_masked.assign(size_t(p.B * p.Hq * p.Lq), 0);
  std::vector<Real> logit(size_t(p.Lk));
  std::vector<uint8_t> use(size_t(p.Lk));
  std::vector<Real> acc(size_t(p.Dv));
  // Plain float K and V (a cache of another dtype or pages reach here converted by the dispatch
  // layer: execute.cpp's logical_keys), strides in floats; a ring's rows stay in its slots (slot(j)).
  const float* const pk = static_cast<const float*>(p.kv.k);
  const float* const pv = static_cast<const float*>(p.kv.v);
  const RowMajor3& ks = p.kv.ks;
  const RowMajor3& vs = p.kv.vs;
  // RoPE: rotated Q rows (query i of sequence b at p.rope_q_position(b, i)) and K rows (key j at j),
  // in double, [B, H, L, D]. In fp32 each rotated value is rounded to float once (as the kernels get it).
  std::vector<double> q_rope, k_rope;
  if (p.rope && p.D > 0) {
    // The sequence's length (its last position + 1, offset included) picks a length-dependent
    // scaling's frequencies: every query row of sequence b and, in attention(), every key.
    q_rope.resize(size_t(p.B * p.Hq * p.Lq * p.D));
    for (int64_t b = 0; b < p.B; ++b) {
      const Frequencies f = frequencies(*p.rope, p.rope_q_position(b, p.Lq - 1) + 1 + p.rope->offset);
      for (int64_t h = 0; h < p.Hq; ++h)
        for (int64_t i = 0; i < p.Lq; ++i)
          rope_row(*p.rope, f, p.rope_q_position(b, i), p.q + b * p.qs.b + h * p.qs.h + i * p.qs.l, p.D,
                   q_rope.data() + ((b * p.Hq + h) * p.Lq + i) * p.D);
    }
    if (p.rope_keys) {
      const Frequencies f = frequencies(*p.rope, p.Lk + p.rope->offset);
      k_rope.resize(size_t(p.B * p.Hkv * p.Lk * p.D));
      for (int64_t b = 0; b < p.B; ++b)
        for (int64_t h = 0; h < p.Hkv; ++h)
          for (int64_t j = 0; j < p.Lk; ++j)
            rope_row(*p.rope, f, j, pk + b * ks.b + h * ks.h + j * ks.l, p.D,
                     k_rope.data() + ((b * p.Hkv + h) * p.Lk + j) * p.D);
    }
  }
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t hk = h / p.group;
      // Empty tensors may have null data (nothing is read): no arithmetic on a null pointer.
      const float* k = pk ? pk + b * ks.b + hk * ks.h : nullptr;
      const float* v = pv ? pv + b * vs.b + hk * vs.h : nullptr;
      for (int64_t i = 0; i < p.Lq; ++i) {
        const int64_t row = (b * p.Hq + h) * p.Lq + i;
        const float* q = p.q ? p.q + b * p.qs.b + h * p.qs.h + i * p.qs.l : nullptr;
        double* out = res.out.data() + row * p.Dv;
        double* w = res.weights.data() + row * p.Lk;
        bool any = false;
        for (int64_t j = 0; j < p.Lk; ++j) {
          use[j] = pair_allowed(p, b, h, i, j);
          if (!use[j]) continue;
          Real s = 0;
          if (!q_rope.empty()) {
            const double* qr = q_rope.data() + row * p.D;
            const double* kr = k_rope.empty() ? nullptr : k_rope.data() + ((b * p.Hkv + hk) * p.Lk + j) * p.D;
            for (int64_t d = 0; d < p.D; ++d) s += Real(qr[d]) * Real(kr ? kr[d] : double(k[p.kv.slot(j) * ks.l + d]));
          } else {
            for (int64_t d = 0; d < p.D; ++d) s += Real(q[d]) * Real(k[p.kv.slot(j) * ks.l + d]);
          }
          s *= Real(p.scale);
          if (p.softcap > 0) s = Real(p.softcap) * std::tanh(s / Real(p.softcap));
          if (p.alibi_slopes) {
            const int64_t d = p.top_left ? i : i + p.key_length(b) - p.query_length(b);
            s -= Real(p.alibi_slopes[h]) * Real(std::llabs(d - j));
          }
          if (p.bias) {
            const auto& m = p.bias;
            const Real bias = m.data[b * m.strides[0] + h * m.strides[1] + i * m.strides[2] + j * m.strides[3]];
            if (bias == -inf) {  // an allowed pair with bias -inf is masked too
              use[j] = 0;
              continue;
            }
            s += bias;
          }
          logit[j] = s;
          any = true;
        }
        // A learned sink: one more term e^sink in the denominator, a key whose value is 0.
        const Real sink = p.sinks ? Real(p.sinks[h]) : -inf;
        if (!any) {
          res.fully_masked[row] = 1;
          res.lse[row] = -inf;
          if (sink > -inf) {  // the sink takes all the weight: O = 0, weights 0, under every policy
            res.lse[row] = double(sink);
            continue;
          }
          if (p.policy == FullyMasked::nan) {
            for (int64_t c = 0; c < p.Dv; ++c) out[c] = nan;
            for (int64_t j = 0; j < p.Lk; ++j) w[j] = nan;
          } else if (p.policy == FullyMasked::uniform) {
            // Over all Lk keys; for a KV cache, over the positions the sequence holds.
            // A ring with sink tokens also holds positions [0, min(sinks, first)).
            const int64_t j0 = p.kv.is_cache() && p.kv.first ? p.kv.first[b] : 0;
            const int64_t j1 = p.kv.is_cache() ? p.key_length(b) : p.Lk;
            const int64_t lead = p.kv.is_cache() ? std::min(p.kv.sink_tokens, j0) : 0;
            const int64_t held = lead + j1 - j0;
            auto is_held = [&](int64_t j) { return j < lead || (j >= j0 && j < j1); };
            if (held > 0) {
              for (int64_t j = 0; j < p.Lk; ++j)
                if (is_held(j)) w[j] = 1.0 / double(held);
              for (int64_t c = 0; c < p.Dv; ++c) {
                Real sum = 0;
                for (int64_t j = 0; j < p.Lk; ++j)
                  if (is_held(j)) sum += Real(v[p.kv.slot(j) * vs.l + c]);
                out[c] = double(sum / Real(held));
              }
            }
          }
          continue;
        }
        Real m = -inf;
        bool saw_nan = false;
        for (int64_t j = 0; j < p.Lk; ++j)
          if (use[j]) {
            saw_nan |= std::isnan(logit[j]);
            m = std::max(m, logit[j]);
          }
        if (saw_nan) m = nan;
        if (sink > -inf && !saw_nan) m = std::max(m, sink);
        Real sum = sink > -inf ? std::exp(sink - m) : 0;
        for (int64_t j = 0; j < p.Lk; ++j)
          if (use[j]) sum += std::exp(logit[j] - m);
        for (int64_t j = 0; j < p.Lk; ++j)
          if (use[j]) w[j] = double(std::exp(logit[j] - m) / sum);
        // Key by key, a row of V each (masked V never read): every output column still sums its
        // terms in key order, but the loop visits only the keys in use, and V row by row.
        std::fill(acc.begin(), acc.end(), Real(0));
        for (int64_t j = 0; j < p.Lk; ++j) {
          if (!use[j]) continue;
          const Real wj = Real(w[j]);
          const float* vj = v + p.kv.slot(j) * vs.l;
          for (int64_t c = 0; c < p.Dv; ++c) acc[size_t(c)] += wj * Real(vj[c]);
        }
        for (int64_t c = 0; c < p.Dv; ++c) out[c] = double(acc[size_t(c)]);
        res.lse[row] = double(m + std::log(sum));
      }
    }
}

}  // namespace

ReferenceResult reference_compute(const Problem& p, Precision precision) {
  ReferenceResult r;
  if (precision == Precision::fp64) compute<double>(p, r);
  else compute<float>(p, r);
  return r;
}

}  // namespace detail

ReferenceResult reference_attention(const ConstTensor& q, const ConstTensor& k,
                                    const ConstTensor& v, const Options& options,
                                    Precision precision) {
  Options o = options;
  o.target = Target::reference;
  const detail::Problem p = detail::make_problem(q, k, v, nullptr, o, {});
  // The reference always returns weights: [B, Hq, Lq, Lk] doubles must be addressable.
  int64_t n = 1;
  for (int64_t dim : {p.B, p.Hq, p.Lq, p.Lk})
    if (__builtin_mul_overflow(n, dim, &n) || n > int64_t(std::min<uint64_t>(uint64_t(1) << 59, std::numeric_limits<size_t>::max() / 16)))
      throw ArgumentError("weights", "the reference's weights [B, Hq, Lq, Lk] = [" + std::to_string(p.B) + ", " +
                                         std::to_string(p.Hq) + ", " + std::to_string(p.Lq) + ", " +
                                         std::to_string(p.Lk) + "] do not fit in memory");
  return detail::reference_compute(p, precision);
}

}  // namespace maskattn
