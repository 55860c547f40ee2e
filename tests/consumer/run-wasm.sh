#!/usr/bin/env bash
# The Emscripten CMake package, used as a downstream project would: installs the already-built
# WebAssembly trees (each one flavour) into one prefix, builds examples/embedding with emcmake
# against that installed package once per flavour the consumer's flags ask for (no flag: simd128;
# -mrelaxed-simd: relaxed; -pthread: simd128-threads), runs each under Node and checks its output
# against the same program built natively against the installed native package.
#   run-wasm.sh SOURCE_DIR NATIVE_BUILD_DIR WASM_BUILD_DIR...
set -euo pipefail
source_dir=$(cd "$1" && pwd) native_build=$2
shift 2
work=$(cd "$(dirname "$native_build")" && pwd)/consumer-wasm
rm -rf "$work" && mkdir -p "$work"
app="$source_dir/examples/embedding"
export NODE_PATH=/usr/share/nodejs  # emcc's JS optimiser (acorn)
export PATH="/usr/bin:$PATH"        # Debian's binaryen before npm's (see CMakeLists.txt)

cmake --install "$native_build" --prefix "$work/native-prefix" >/dev/null
cmake -S "$app" -B "$work/native" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/native-prefix" >/dev/null
cmake --build "$work/native" >/dev/null
"$work/native/embedding_app" >"$work/native.txt"
"$work/native/embedding_app" --builtin >"$work/native-builtin.txt"
cmp "$work/native.txt" "$work/native-builtin.txt" || { echo "FAIL native: host executor and built-in pool differ"; exit 1; }

for dir in "$@"; do cmake --install "$dir" --prefix "$work/wasm-prefix" >/dev/null; done
echo "installed flavours: $(cd "$work"/wasm-prefix/lib/cmake/maskattn && ls maskattn-wasm-*-targets.cmake | sed 's/maskattn-wasm-//; s/-targets.cmake//' | tr '\n' ' ')"

status=0
check() {  # check NAME CXX_FLAGS NODE_FLAGS...
  local name=$1 flags=$2
  shift 2
  local dir="$work/app-$name"
  emcmake cmake -S "$app" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=$flags" \
    -Dmaskattn_DIR="$work/wasm-prefix/lib/cmake/maskattn" >"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  grep -q "maskattn WebAssembly flavour: $name\$" "$dir.log" || { echo "FAIL $name: flavour not picked"; grep flavour "$dir.log"; return 1; }
  cmake --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  # --no-experimental-fetch: Emscripten 3.1.6's glue would fetch the .wasm by file path in Node 18+.
  node --no-experimental-fetch "$@" "$dir/embedding_app.js" >"$work/$name.txt" 2>"$work/$name.err" ||
    { cut -c1-300 "$work/$name.err" | grep -v '^ ' | tail -5; return 1; }
  cut -c1-300 "$work/$name.err"
  # The kernel the flavour promises is in the program (f32x4 instructions; relaxed_madd for relaxed).
  bash "$source_dir/tests/wasm/check_artifact.sh" "$dir/embedding_app.wasm" "$([ "${name%-threads}" = relaxed ] && echo relaxed || echo simd)" | tail -2
  # Same lines, numbers within the contract's bound (1e-5 on outputs; sums over ~1e5 outputs 1e-4 relative).
  node -e '
    const fs = require("fs");
    const [a, b] = process.argv.slice(1).map((f) => fs.readFileSync(f, "utf8").trim().split("\n"));
    if (a.length !== b.length) throw new Error(`line counts ${a.length} vs ${b.length}`);
    let worst = 0;
    a.forEach((la, i) => {
      const ta = la.split(" "), tb = b[i].split(" ");
      if (ta.length !== tb.length) throw new Error(`line ${i + 1}: ${la} vs ${b[i]}`);
      ta.forEach((x, j) => {
        const y = tb[j], nx = Number(x), ny = Number(y);
        if (Number.isNaN(nx) || x === "row") { if (x !== y) throw new Error(`line ${i + 1}: ${la} vs ${b[i]}`); return; }
        const tol = ta[1] === "sum" || ta[1] === "abs" ? 1e-4 * Math.abs(nx) + 1e-3 : 1e-5;
        worst = Math.max(worst, Math.abs(nx - ny));
        if (!(Math.abs(nx - ny) <= tol)) throw new Error(`line ${i + 1}: ${x} vs ${y} (tolerance ${tol})`);
      });
    });
    console.log(`${a.length} lines match the native program (largest difference ${worst.toExponential(2)})`);
  ' "$work/native.txt" "$work/$name.txt"
}
for spec in "simd128::" "relaxed:-mrelaxed-simd:--experimental-wasm-relaxed-simd" "simd128-threads:-pthread:"; do
  IFS=: read -r name flags node_flags <<<"$spec"
  [ -n "$(ls "$work"/wasm-prefix/lib/cmake/maskattn/maskattn-wasm-"$name"-targets.cmake 2>/dev/null)" ] || continue
  echo "== WebAssembly consumer, flavour $name (CMAKE_CXX_FLAGS='$flags')"
  # shellcheck disable=SC2086
  if check "$name" "$flags" $node_flags; then echo "PASS $name"; else echo "FAIL $name"; status=1; fi
done
exit $status
