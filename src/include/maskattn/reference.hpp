// The reference: naive attention evaluated straight from the contract's definitions, one (i, j)
// pair at a time, with no tiling, no intervals and no online softmax. It shares nothing with the
// fused kernel but argument validation, so comparing the two checks the kernel's mask logic too.
//
// In double precision it is the ground truth of the tests; in single precision it is the
// "naive fp32 implementation" of the error-bound policy (docs/semantics.md, "Numbers").
#pragma once

#include <vector>

#include "maskattn/maskattn.hpp"

namespace maskattn {

enum class Precision { fp64, fp32 };

struct ReferenceResult {
  std::vector<double> out;      // [B, Hq, Lq, Dv]
  std::vector<double> weights;  // [B, Hq, Lq, Lk]
  std::vector<double> lse;      // [B, Hq, Lq]
  std::vector<uint8_t> fully_masked;  // [B, Hq, Lq]: 1 where the masks allow no key
};

// Same arguments and validation as attention(); `options.target`, `threads` and `stats` are ignored.
ReferenceResult reference_attention(const ConstTensor& q, const ConstTensor& k,
                                    const ConstTensor& v, const Options& options = {},
                                    Precision precision = Precision::fp64);

}  // namespace maskattn
