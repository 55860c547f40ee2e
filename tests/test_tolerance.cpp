// The tolerance policy (docs/semantics.md "Numbers") on shared cases, tests/tolerance_cases.inc,
// which the JavaScript suite runs through its own implementation too (tests/js/tolerance.test.mjs):
// one policy, two implementations that must agree case by case.
#include <cmath>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

struct ToleranceCase {
  const char* name;
  double floor, cap, rel_floor;
  std::vector<double> got, fp64, fp32;
  bool passes;
};

const ToleranceCase kCases[] = {
#include "tolerance_cases.inc"
};

TEST(TolerancePolicy, SharedCasesAgreeWithJavaScript) {
  for (const ToleranceCase& c : kCases) {
    maskattn_test::Tolerance tol;
    tol.floor = c.floor;
    tol.cap = c.cap;
    tol.rel_floor = c.rel_floor;
    std::vector<float> got;
    for (double x : c.got) got.push_back(float(x));
    const std::vector<int64_t> dims = {int64_t(got.size())};
    const bool passed = bool(maskattn_test::compare_to_reference(c.name, got, c.fp64, c.fp32, dims, tol));
    EXPECT_EQ(passed, c.passes) << c.name;
  }
}

}  // namespace
