// The build contains exactly the kernels it was configured with, and runs the one it should:
// a silent fallback (e.g. a SIMD128 build whose kernel came out scalar) fails here. What each
// target should be is read from the target table (maskattn/targets.inc), so no target is named here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

namespace {

// A row of the target table, the columns the tests check.
struct TargetRow {
  const char* name;
  maskattn::Target target;
  int lanes;
  int preference;
  std::string family;
};
const TargetRow kRows[] = {
#define MASKATTN_TARGET(name, lanes, preference, family, ...) \
  {#name, maskattn::Target::name, lanes, preference, #family},
#include <maskattn/targets.inc>
#undef MASKATTN_TARGET
};

// The family of rows (besides "any") that a build for this architecture compiles (CMakeLists.txt):
// all of them, except that a WebAssembly build without SIMD128 compiles none of "wasm".
#if defined(__EMSCRIPTEN__)
const char* const kFamily = "wasm";
#elif defined(__aarch64__)
const char* const kFamily = "arm";
#elif defined(__x86_64__) || defined(_M_X64)
const char* const kFamily = "x86";
#else
const char* const kFamily = "";
#endif

std::vector<std::string> expected_targets() {
  std::vector<std::string> out;
  std::stringstream csv(MASKATTN_EXPECTED_TARGETS);
  for (std::string t; std::getline(csv, t, ',');) out.push_back(t);
  return out;
}
bool expected(const std::string& name) {
  const auto list = expected_targets();
  return std::find(list.begin(), list.end(), name) != list.end();
}

const TargetRow* row_of(const std::string& name) {
  for (const auto& row : kRows)
    if (name == row.name) return &row;
  return nullptr;
}

TEST(Build, EveryConfiguredKernelIsCompiledIn) {
  for (const std::string& name : expected_targets()) {
    SCOPED_TRACE(name);
    const TargetRow* row = row_of(name);
    ASSERT_NE(row, nullptr) << "not a row of the target table";
    EXPECT_EQ(std::string(maskattn::target_name(row->target)), name);
    // Natively the CPU may lack a target; the library must still know it is compiled in, which
    // shows as a "not available here" error naming the compiled list rather than "unknown".
    if (!maskattn::target_available(row->target)) {
      std::printf("[maskattn] %s compiled in but not supported by this CPU: its tests skip\n", name.c_str());
      continue;
    }
    EXPECT_EQ(maskattn::target_lanes(row->target), row->lanes);
  }
}

// Every row of this architecture's family is compiled in (a build whose CMake never added a kernel
// would list only the rest), and the rows without a CPU check (every family but x86's) run.
TEST(Build, TheArchitecturesKernelsAreCompiledIn) {
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    if (row.family == "any") {
      EXPECT_TRUE(expected(row.name)) << "configured kernels: " << MASKATTN_EXPECTED_TARGETS;
    } else if (row.family == kFamily) {
#if defined(__EMSCRIPTEN__)
      if (!expected(row.name)) continue;  // the scalar build: checked by the best-target test
#elif defined(MASKATTN_HOST_TARGETS_ONLY)
      if (!expected(row.name)) continue;  // a test build left out a kernel this CPU cannot run
#endif
      EXPECT_TRUE(expected(row.name)) << "configured kernels: " << MASKATTN_EXPECTED_TARGETS;
      if (row.family != "x86") EXPECT_TRUE(maskattn::target_available(row.target));
    } else {
      EXPECT_FALSE(expected(row.name)) << "a kernel of another architecture";
    }
  }
}

// The available row of highest preference, which is also the widest: a build with SIMD runs its
// SIMD kernel, and of two kernels as wide the one with more instructions where the CPU has them.
TEST(Build, AutomaticPicksTheWidestAvailable) {
  const auto best = maskattn::best_target();
  std::printf("[maskattn] best target: %s (%d lanes)\n", maskattn::target_name(best), maskattn::target_lanes(best));
  const TargetRow* want = nullptr;
  for (const auto& row : kRows)
    if (expected(row.name) && maskattn::target_available(row.target) && (!want || row.preference > want->preference))
      want = &row;
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(std::string(maskattn::target_name(best)), want->name);
  EXPECT_TRUE(maskattn::target_available(best));
  for (const auto& row : kRows)
    if (maskattn::target_available(row.target))
      EXPECT_GE(maskattn::target_lanes(best), row.lanes) << row.name << " is wider";
#if defined(__EMSCRIPTEN__)
  // A SIMD build must not come out scalar: its best is its SIMD row.
  for (const auto& row : kRows)
    if (row.family == kFamily && expected(row.name)) EXPECT_EQ(best, row.target);
#endif
}

}  // namespace
