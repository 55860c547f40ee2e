# Cross build for 64-bit ARM Linux with Debian's cross compiler (apt-get install
# g++-aarch64-linux-gnu qemu-user), tests run under user-mode qemu:
#   cmake -S . -B build/aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   cmake --build build/aarch64 && ctest --test-dir build/aarch64
# xsimd is header-only and reached through the build's symlink folder as in every build; GoogleTest
# is built from /usr/src/googletest (tests/CMakeLists.txt).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(MASKATTN_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${MASKATTN_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${MASKATTN_CROSS_TRIPLE}-g++)

# Libraries, headers and packages come from the target's root only; programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${MASKATTN_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# ctest runs the aarch64 programs under qemu, with the cross toolchain's loader and libraries.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/${MASKATTN_CROSS_TRIPLE})
