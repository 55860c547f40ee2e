#!/usr/bin/env bash
# Installs what maskattn needs, and only what is missing, so it is quick and safe to run again.
# Debian packages via apt-get (as root, or through sudo); npm packages via npm.
#
#   setup.sh start   what building the WebAssembly modules and serving the demo need (npm start)
#   setup.sh         that and what the tests need (npm test): native builds, benchmarks, Chromium...
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case "$mode" in start|test) ;; *) echo "setup.sh: unknown mode '$mode' (start or test)" >&2; exit 2 ;; esac

# The demo: Emscripten's CMake build of the library (xsimd's headers), clang-19 for the relaxed-SIMD builds.
packages=(cmake ninja-build emscripten libxsimd-dev
          clang-19 lld-19 llvm-19)          # the relaxed-SIMD WebAssembly builds (emcc on clang-19)
# The tests: native and cross builds, the benchmarks' libraries, Chromium for the browser tests, the fuzzer.
test_packages=(g++ libgtest-dev googletest wabt
          chromium libopenblas-dev libeigen3-dev libdnnl-dev
          g++-aarch64-linux-gnu qemu-user  # the aarch64 (neon64) cross build, tests under qemu
          libclang-rt-19-dev               # libFuzzer and the sanitizers' runtimes for clang-19 (tests/fuzz)
          fonts-wqy-zenhei                 # a CJK font: scripts/render-ocr-lines.mjs draws a line in Chinese
          ccache)                          # scripts/test.sh: a library built twice with the same flags compiles once
[ "$mode" = start ] || packages+=("${test_packages[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)

if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
    echo "error: need root to run: apt-get install ${missing[*]}" >&2; exit 1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages (the JS API's dev tools and test oracles), from package-lock.json when present.
if [ -f package.json ] && grep -q '"devDependencies"' package.json; then
  if [ ! -d node_modules ] || [ package.json -nt node_modules/.package-lock.json ] ||
     { [ -f package-lock.json ] && [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
    echo "==> installing npm packages"
    if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi
  fi
fi
