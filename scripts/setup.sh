#!/usr/bin/env bash
# Installs what maskattn's build, tests and demo need, and only what is missing, so it is quick and
# safe to run again. Debian packages via apt-get (as root, or through sudo); npm packages via npm.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ emscripten libxsimd-dev libgtest-dev googletest wabt
          chromium libopenblas-dev libeigen3-dev libdnnl-dev
          g++-aarch64-linux-gnu qemu-user  # the aarch64 (neon64) cross build, tests under qemu
          clang-19 lld-19 llvm-19          # the relaxed-SIMD WebAssembly builds (emcc on clang-19)
          libclang-rt-19-dev               # libFuzzer and the sanitizers' runtimes for clang-19 (tests/fuzz)
          fonts-wqy-zenhei)                # a CJK font: scripts/render-ocr-lines.mjs draws a line in Chinese
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
