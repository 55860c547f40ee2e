// Mask-building helpers (see maskattn/masks.hpp): dense masks equal to the library's compact rules,
// each after its arguments are checked (problem/validate.cpp).
// Semantics: docs/semantics.md, "Which keys a query may attend".
#include <algorithm>
#include <limits>
#include <string>

#include "problem/problem.hpp"
#include "maskattn/masks.hpp"

namespace maskattn {
namespace {

// The diagonal of query row i (maskattn's d(i) with no lengths).
inline int64_t diagonal(int64_t i, int64_t Lq, int64_t Lk, Align align) {
  return align == Align::top_left ? i : i + (Lk - Lq);
}

}  // namespace

std::vector<uint8_t> create_causal_mask(int64_t Lq, int64_t Lk, Align align) {
  std::vector<uint8_t> mask(detail::check_causal_mask(Lq, Lk, align), 0);
  if (mask.empty()) return mask;  // Lq or Lk is 0: no rows to visit
  for (int64_t i = 0; i < Lq; ++i) {
    // Keys 0 .. min(d(i), Lk - 1) are allowed (none when d(i) < 0).
    const int64_t end = std::min(diagonal(i, Lq, Lk, align) + 1, Lk);
    if (end > 0) std::fill_n(mask.begin() + i * Lk, end, uint8_t{1});
  }
  return mask;
}

std::vector<uint8_t> create_padding_mask(const std::vector<int32_t>& lengths, int64_t L) {
  std::vector<uint8_t> mask(detail::check_padding_mask(lengths, L), 0);
  const int64_t B = static_cast<int64_t>(lengths.size());
  for (int64_t b = 0; b < B; ++b) std::fill_n(mask.begin() + b * L, lengths[b], uint8_t{1});
  return mask;
}

std::vector<uint8_t> create_window_mask(int64_t Lq, int64_t Lk, int64_t left, int64_t right, Align align) {
  std::vector<uint8_t> mask(detail::check_window_mask(Lq, Lk, left, right, align), 0);
  if (mask.empty()) return mask;  // Lq or Lk is 0: no rows to visit
  for (int64_t i = 0; i < Lq; ++i) {
    const int64_t d = diagonal(i, Lq, Lk, align);
    const int64_t lo = left < 0 ? 0 : std::max<int64_t>(d - left, 0);
    const int64_t hi = right < 0 ? Lk : std::min<int64_t>(d + right + 1, Lk);  // exclusive
    if (hi > lo) std::fill(mask.begin() + i * Lk + lo, mask.begin() + i * Lk + hi, uint8_t{1});
  }
  return mask;
}

std::vector<int32_t> segments_from_lengths(const std::vector<int32_t>& lengths, int64_t L) {
  detail::check_document_lengths(lengths, L);
  std::vector<int32_t> ids(static_cast<size_t>(L), -1);
  auto it = ids.begin();
  for (size_t n = 0; n < lengths.size(); ++n) it = std::fill_n(it, lengths[n], static_cast<int32_t>(n));
  return ids;
}

std::vector<uint8_t> from_key_padding_mask(const uint8_t* ignore, size_t n) {
  detail::check_key_padding(ignore, n);
  std::vector<uint8_t> allowed(n);
  for (size_t i = 0; i < n; ++i) allowed[i] = ignore[i] == 0 ? 1 : 0;
  return allowed;
}

std::vector<float> to_additive_mask(const std::vector<uint8_t>& allowed) {
  std::vector<float> bias(allowed.size());
  for (size_t i = 0; i < allowed.size(); ++i)
    bias[i] = allowed[i] != 0 ? 0.0f : -std::numeric_limits<float>::infinity();
  return bias;
}

}  // namespace maskattn
