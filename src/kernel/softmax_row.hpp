// The online-softmax state of one query row (the math is in kernel/online_softmax.hpp). Plain
// data with no SIMD, so workspaces can hold split-K partials of any architecture.
// Semantics: docs/semantics.md, "Fully masked rows".
#pragma once

#include <limits>

namespace maskattn::detail {

struct SoftmaxRow {
  float m = -std::numeric_limits<float>::infinity();  // running max (NaN once a NaN logit was seen)
  float l = 0.0f;                                      // running sum of e^(s - m)
  bool has_key = false;  // some pair the masks allow was seen (decided from masks only)
};

}  // namespace maskattn::detail
