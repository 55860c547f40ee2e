// Mask-building helpers (see maskattn/masks.hpp): dense masks equal to the library's compact rules.
// Semantics: docs/semantics.md, "Which keys a query may attend".
#include <algorithm>
#include <limits>
#include <string>

#include "base/errors.hpp"
#include "maskattn/masks.hpp"

namespace maskattn {
namespace {

using detail::cat;
using detail::fail;

void check_length(int64_t value, const char* name) {
  if (value < 0 || value > kMaxMaskLength)
    fail(name, cat("expected 0 <= ", name, " <= ", kMaxMaskLength, ", given ", value));
}

void check_align(Align align) {
  if (align != Align::bottom_right && align != Align::top_left)
    fail("align", cat("expected Align::bottom_right (0) or Align::top_left (1), given ", static_cast<int>(align)));
}

// Lq * Lk elements, each length already checked to be <= 2^23 (so the product fits in int64).
size_t area(int64_t Lq, int64_t Lk) {
  const int64_t n = Lq * Lk;
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / sizeof(float))
    fail("Lq", cat("size overflows: ", Lq, " x ", Lk, " elements do not fit in memory"));
  return static_cast<size_t>(n);
}

// The diagonal of query row i (maskattn's d(i) with no lengths).
inline int64_t diagonal(int64_t i, int64_t Lq, int64_t Lk, Align align) {
  return align == Align::top_left ? i : i + (Lk - Lq);
}

}  // namespace

std::vector<uint8_t> create_causal_mask(int64_t Lq, int64_t Lk, Align align) {
  check_length(Lq, "Lq");
  check_length(Lk, "Lk");
  check_align(align);
  std::vector<uint8_t> mask(area(Lq, Lk), 0);
  if (mask.empty()) return mask;  // Lq or Lk is 0: no rows to visit
  for (int64_t i = 0; i < Lq; ++i) {
    // Keys 0 .. min(d(i), Lk - 1) are allowed (none when d(i) < 0).
    const int64_t end = std::min(diagonal(i, Lq, Lk, align) + 1, Lk);
    if (end > 0) std::fill_n(mask.begin() + i * Lk, end, uint8_t{1});
  }
  return mask;
}

std::vector<uint8_t> create_padding_mask(const std::vector<int32_t>& lengths, int64_t L) {
  check_length(L, "L");
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 0 || lengths[b] > L)
      fail(cat("lengths[", b, "]"), cat("expected 0 <= lengths[", b, "] <= L = ", L, ", given ", lengths[b]));
  const int64_t B = static_cast<int64_t>(lengths.size());
  if (B > 0 && static_cast<uint64_t>(L) > std::numeric_limits<size_t>::max() / sizeof(float) / static_cast<uint64_t>(B))
    fail("lengths", cat("size overflows: ", B, " x ", L, " elements do not fit in memory"));
  std::vector<uint8_t> mask(static_cast<size_t>(B * L), 0);
  for (int64_t b = 0; b < B; ++b) std::fill_n(mask.begin() + b * L, lengths[b], uint8_t{1});
  return mask;
}

std::vector<uint8_t> create_window_mask(int64_t Lq, int64_t Lk, int64_t left, int64_t right, Align align) {
  check_length(Lq, "Lq");
  check_length(Lk, "Lk");
  if (left < -1) fail("left", cat("expected left >= -1 (-1 = unbounded), given ", left));
  if (right < -1) fail("right", cat("expected right >= -1 (-1 = unbounded), given ", right));
  check_align(align);
  std::vector<uint8_t> mask(area(Lq, Lk), 0);
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
  check_length(L, "L");
  int64_t total = 0;
  for (size_t n = 0; n < lengths.size(); ++n) {
    if (lengths[n] < 0) fail(cat("lengths[", n, "]"), cat("expected lengths[", n, "] >= 0, given ", lengths[n]));
    total += lengths[n];
    if (total > L)
      fail("lengths", cat("expected the documents to fit in L = ", L, ": sum of lengths[0..", n, "] is ", total));
  }
  if (lengths.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("lengths", cat("expected at most ", std::numeric_limits<int32_t>::max(), " documents, given ", lengths.size()));
  std::vector<int32_t> ids(static_cast<size_t>(L), -1);
  auto it = ids.begin();
  for (size_t n = 0; n < lengths.size(); ++n) it = std::fill_n(it, lengths[n], static_cast<int32_t>(n));
  return ids;
}

std::vector<uint8_t> from_key_padding_mask(const uint8_t* ignore, size_t n) {
  if (ignore == nullptr && n > 0) fail("ignore", cat("expected a buffer of ", n, " entries, given a null pointer"));
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
