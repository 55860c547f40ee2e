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
#if defined(__x86_64__) || defined(_M_X64)
#include <xsimd/config/xsimd_cpuid.hpp>
#endif

namespace {

// Each row's cpu_check, evaluated here where the build compiles the row's family (x86 checks read
// xsimd's cpuid as `cpu`, as the table says), so a family whose dispatch skipped its rows' checks
// shows as a difference; rows of other families are not compiled and their checks never run.
#if defined(__x86_64__) || defined(_M_X64)
#define MASKATTN_TEST_CHECK_x86(check) \
  [] { const auto cpu = xsimd::available_architectures(); (void)cpu; return bool(check); }
#else
#define MASKATTN_TEST_CHECK_x86(check) [] { return false; }
#endif
#if defined(__aarch64__)
#define MASKATTN_TEST_CHECK_arm(check) [] { return bool(check); }
#else
#define MASKATTN_TEST_CHECK_arm(check) [] { return false; }
#endif
#if defined(__EMSCRIPTEN__)
#define MASKATTN_TEST_CHECK_wasm(check) [] { return bool(check); }
#else
#define MASKATTN_TEST_CHECK_wasm(check) [] { return false; }
#endif
#define MASKATTN_TEST_CHECK_any(check) [] { return bool(check); }

// A row of the target table, the columns the tests check.
struct TargetRow {
  const char* name;
  maskattn::Target target;
  int lanes;
  int preference;
  std::string family;
  bool (*cpu_check)();
  int decode_rows;
};
const TargetRow kRows[] = {
#define MASKATTN_TARGET(name, lanes, preference, family, arch, int_dot, cpu_check, simd, decode_rows, ...) \
  {#name, maskattn::Target::name, lanes, preference, #family, MASKATTN_TEST_CHECK_##family(cpu_check), decode_rows},
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

// A compiled row runs exactly where its cpu_check holds, in every family (the "any" row too).
TEST(Build, EveryFamilyHonoursItsRowsCpuCheck) {
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    if (!expected(row.name)) continue;  // not compiled in: never available (checked above)
    EXPECT_EQ(maskattn::target_available(row.target), row.cpu_check());
  }
}

// Deterministic values in [-1, 1) (a 32-bit LCG): data whose rounding differs between kernels.
std::vector<float> lcg_values(size_t n, uint32_t seed) {
  std::vector<float> x(n);
  for (float& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = float(seed >> 8) / float(1u << 23) - 1.0f;
  }
  return x;
}

// The automatic kernel choice follows the table's decode_rows, the same number decode_max_rows
// reports: with float32 K and V, a KV head group of decode_rows query rows runs the decode kernel
// and one more row the prefill kernel (told apart by their results' last bits, which differ on
// this data: checked first).
TEST(Build, AutomaticKernelChoiceFollowsTheTable) {
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    if (!expected(row.name) || !maskattn::target_available(row.target)) continue;
    EXPECT_EQ(maskattn::decode_max_rows(row.target, true), row.decode_rows);
    EXPECT_EQ(maskattn::decode_max_rows(row.target, false), maskattn::decode_max_rows(maskattn::Target::reference, false));
    for (int64_t Lq : {int64_t(row.decode_rows), int64_t(row.decode_rows) + 1}) {
      SCOPED_TRACE("Lq " + std::to_string(Lq));
      const int64_t B = 1, H = 1, Lk = 333, D = 64;
      const std::vector<float> q = lcg_values(size_t(B * H * Lq * D), 1), k = lcg_values(size_t(B * H * Lk * D), 2),
                               v = lcg_values(size_t(B * H * Lk * D), 3);
      auto run = [&](maskattn::Kernel kernel) {
        std::vector<float> out(q.size());
        maskattn::Options opt;
        opt.target = row.target;
        opt.kernel = kernel;
        opt.threads = 1;
        maskattn::attention(maskattn::bhld(q.data(), B, H, Lq, D), maskattn::bhld(k.data(), B, H, Lk, D),
                            maskattn::bhld(v.data(), B, H, Lk, D), maskattn::bhld(out.data(), B, H, Lq, D), opt);
        return out;
      };
      const auto decode = run(maskattn::Kernel::decode), prefill = run(maskattn::Kernel::prefill);
      ASSERT_NE(decode, prefill) << "the kernels agree bitwise on this data: the choice cannot be seen";
      EXPECT_EQ(run(maskattn::Kernel::automatic), Lq <= row.decode_rows ? decode : prefill);
    }
  }
}

}  // namespace
