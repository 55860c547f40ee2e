#!/usr/bin/env bash
# Installs the library from BUILD_DIR into a scratch prefix and builds every C++ example of README.md
# and docs/*.md (each ```cpp block after an "example: cpp..." marker, tests/docs/blocks.mjs) as its
# own project, the docs' `cmake-app` CMakeLists.txt with the example as main.cpp, against the
# installed package with find_package(maskattn CONFIG), and runs it.
# Cross builds add TOOLCHAIN_FILE and an EMULATOR command: the consumer is configured with the same
# toolchain, finds the package through maskattn_DIR (a cross toolchain confines searches to its
# sysroot), and runs under the emulator.
#   run.sh BUILD_DIR SOURCE_DIR [TOOLCHAIN_FILE [EMULATOR ARGS...]]
set -euo pipefail
build_dir="$1" source_dir="$2" toolchain="${3:-}"
emulator=("${@:4}")
work="$(cd "$build_dir" && pwd)/consumer-test"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
names=$(node "$source_dir/tests/docs/blocks.mjs" write cpp "$work/examples")
node "$source_dir/tests/docs/blocks.mjs" write cmake "$work/examples" >/dev/null
[ -f "$work/examples/cmake-app.cmake" ] || { echo "no cmake-app example (the consumer's CMakeLists.txt) in README.md or docs/*.md"; exit 1; }
program=$(sed -nE 's/^add_executable\(([^ )]+).*/\1/p' "$work/examples/cmake-app.cmake")
for name in $names; do
  app="$work/$name"
  mkdir -p "$app"
  cp "$work/examples/cmake-app.cmake" "$app/CMakeLists.txt"
  cp "$work/examples/$name.cpp" "$app/main.cpp"
  cross=()
  [ -z "$toolchain" ] || cross=(-DCMAKE_TOOLCHAIN_FILE="$toolchain" -Dmaskattn_DIR="$(echo "$work"/prefix/lib*/cmake/maskattn)")
  cmake -S "$app" -B "$app/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" "${cross[@]}" >/dev/null
  cmake --build "$app/build" >/dev/null
  echo "== example '$name'"
  "${emulator[@]}" "$app/build/$program" | node "$source_dir/tests/consumer/prose.mjs" "$name"
done
