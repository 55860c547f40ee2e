#!/usr/bin/env bash
# Installs the library from BUILD_DIR into a scratch prefix, builds the README's and docs' C++ examples as a
# separate CMake project with find_package(maskattn CONFIG), and runs it.
# Cross builds add TOOLCHAIN_FILE and an EMULATOR command: the consumer is configured with the same
# toolchain, finds the package through maskattn_DIR (a cross toolchain confines searches to its
# sysroot), and runs under the emulator.
#   run.sh BUILD_DIR SOURCE_DIR [TOOLCHAIN_FILE [EMULATOR ARGS...]]
set -euo pipefail
build_dir="$1" source_dir="$2" toolchain="${3:-}"
emulator=("${@:4}")
work="$build_dir/consumer-test"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# The C++ examples of README.md and docs/*.md: each ```cpp block after an "example: cpp..." marker
# (in whichever of those files holds it), built as its own program against the installed package and run.
for name in cpp cpp-cache cpp-generation; do
  awk -v m="<!-- example: $name -->" '$0 == m {f=1; next} f && /^```cpp/{g=1; next} g && /^```/{exit} g' \
    "$source_dir/README.md" "$source_dir"/docs/*.md > "$work/$name.cpp"
  [ -s "$work/$name.cpp" ] || { echo "no '$name' example found in README.md or docs/*.md"; exit 1; }
  cross=()
  [ -z "$toolchain" ] || cross=(-DCMAKE_TOOLCHAIN_FILE="$toolchain" -Dmaskattn_DIR="$(echo "$work"/prefix/lib*/cmake/maskattn)")
  cmake -S "$source_dir/tests/consumer" -B "$work/build-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DCONSUMER_SOURCE="$work/$name.cpp" "${cross[@]}" >/dev/null
  cmake --build "$work/build-$name" >/dev/null
  echo "== example '$name'"
  "${emulator[@]}" "$work/build-$name/consumer" | node "$source_dir/tests/consumer/prose.mjs" "$name"
done
