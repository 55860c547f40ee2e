#!/usr/bin/env bash
# Installs the library from BUILD_DIR into a scratch prefix, builds the README's C++ example as a
# separate CMake project with find_package(maskattn CONFIG), and runs it.
set -euo pipefail
build_dir="$1" source_dir="$2"
work="$build_dir/consumer-test"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# The README's C++ example: the ```cpp block after the "example: cpp" marker.
awk '/<!-- example: cpp -->/{f=1; next} f && /^```cpp/{g=1; next} g && /^```/{exit} g' \
  "$source_dir/README.md" > "$work/main.cpp"
[ -s "$work/main.cpp" ] || { echo "no C++ example found in README.md"; exit 1; }
cmake -S "$source_dir/tests/consumer" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCONSUMER_SOURCE="$work/main.cpp" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
