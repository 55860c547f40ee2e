// Prints the x86 rows of the target table (src/include/maskattn/targets.inc) whose CPU check holds on
// the machine running it, separated by ';' (a CMake list). CMakeLists.txt runs it at configure time
// when MASKATTN_HOST_TARGETS_ONLY is set, with the same check dispatch.cpp makes at run time.
#include <cstdio>
#include <cstring>

#include <xsimd/config/xsimd_cpuid.hpp>

int main() {
  const auto cpu = xsimd::available_architectures();
  (void)cpu;
#define MASKATTN_TARGET(name, lanes, preference, family, arch, int_dot, cpu_check, ...) \
  if (std::strcmp(#family, "x86") == 0 && (cpu_check)) std::printf("%s;", #name);
#include "maskattn/targets.inc"
#undef MASKATTN_TARGET
  return 0;
}
