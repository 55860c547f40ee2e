// The build contains exactly the kernels it was configured with, and runs the one it should:
// a silent fallback (e.g. a SIMD128 build whose kernel came out scalar) fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

namespace {

std::vector<std::string> expected_targets() {
  std::vector<std::string> out;
  std::stringstream csv(MASKATTN_EXPECTED_TARGETS);
  for (std::string t; std::getline(csv, t, ',');) out.push_back(t);
  return out;
}

maskattn::Target by_name(const std::string& name) {
  for (auto t : maskattn::kKernelTargets)
    if (name == maskattn::target_name(t)) return t;
  ADD_FAILURE() << "unknown target " << name;
  return maskattn::Target::scalar;
}

TEST(Build, EveryConfiguredKernelIsCompiledIn) {
  for (const std::string& name : expected_targets()) {
    SCOPED_TRACE(name);
    const auto t = by_name(name);
    // Natively the CPU may lack a target; the library must still know it is compiled in, which
    // shows as a "not available here" error naming the compiled list rather than "unknown".
    if (!maskattn::target_available(t)) {
      std::printf("[maskattn] %s compiled in but not supported by this CPU: its tests skip\n", name.c_str());
      continue;
    }
    EXPECT_EQ(maskattn::target_lanes(t), name == "scalar" ? 1 : name == "avx2" ? 8 : name.rfind("avx512", 0) == 0 ? 16 : 4);
  }
}

TEST(Build, AutomaticPicksTheWidestAvailable) {
  const auto best = maskattn::best_target();
  std::printf("[maskattn] best target: %s (%d lanes)\n", maskattn::target_name(best), maskattn::target_lanes(best));
#if defined(__EMSCRIPTEN__)
  const auto expected = expected_targets();
  const bool simd_build = std::find(expected.begin(), expected.end(), "simd128") != expected.end();
  EXPECT_EQ(std::string(maskattn::target_name(best)), simd_build ? "simd128" : "scalar");
#elif defined(__aarch64__)
  EXPECT_EQ(std::string(maskattn::target_name(best)), "neon64");
#else
  // The widest vectors this CPU runs, and of two kernels as wide the one with more instructions
  // (avx512vnni over avx512) where the CPU has them.
  for (auto t : maskattn::kKernelTargets)
    if (maskattn::target_available(t))
      EXPECT_GE(maskattn::target_lanes(best), maskattn::target_lanes(t)) << maskattn::target_name(t) << " is wider";
  EXPECT_TRUE(maskattn::target_available(best));
  if (maskattn::target_available(maskattn::Target::avx512vnni)) EXPECT_EQ(best, maskattn::Target::avx512vnni);
#endif
}

#if defined(__aarch64__)
// NEON is part of the aarch64 baseline, so an aarch64 build must carry the neon64 kernel and every
// aarch64 CPU must run it. MASKATTN_EXPECTED_TARGETS alone would not catch a build whose CMake never
// added the kernel (the list would then say "scalar" too): this checks against the architecture.
TEST(Build, Aarch64CarriesTheNeon64Kernel) {
  const auto expected = expected_targets();
  EXPECT_TRUE(std::find(expected.begin(), expected.end(), "neon64") != expected.end())
      << "configured kernels: " << MASKATTN_EXPECTED_TARGETS;
  EXPECT_TRUE(maskattn::target_available(maskattn::Target::neon64));
  EXPECT_EQ(maskattn::target_lanes(maskattn::Target::neon64), 4);
  EXPECT_EQ(std::string(maskattn::target_name(maskattn::best_target())), "neon64");
}
#endif

}  // namespace
