#!/usr/bin/env bash
# The layering rule of src/ (README "Layout"): a folder includes only itself and the layers below it,
#   base < problem < kernel, reference < dispatch < cache < api
# (kernel and reference are siblings: neither includes the other); the public headers
# (src/include/maskattn) may be included from anywhere and include only each other.
# Prints every include that climbs and exits 1 if there is one.
set -uo pipefail
cd "$(dirname "$0")/.."
declare -A rank=([base]=0 [problem]=1 [kernel]=2 [reference]=2 [dispatch]=3 [cache]=4 [api]=5)
bad=0 checked=0
while IFS= read -r file; do
  layer=${file#src/}; layer=${layer%%/*}
  while IFS= read -r target; do
    checked=$((checked + 1))
    [[ "$target" == */* ]] || continue  # a file CMake generates into the build folder (the target table's rows compiled)
    to=${target%%/*}
    if [ "$layer" = include ]; then
      [ "$to" = maskattn ] && continue
      echo "$file: includes \"$target\": the public headers include only maskattn/..."; bad=1; continue
    fi
    [ "$to" = maskattn ] && continue
    if [ -z "${rank[$layer]+x}" ] || [ -z "${rank[$to]+x}" ]; then
      echo "$file: includes \"$target\": $layer or $to is not a layer of src/ (add it to this script and the README)"; bad=1; continue
    fi
    if [ "$to" != "$layer" ] && [ "${rank[$to]}" -ge "${rank[$layer]}" ]; then
      echo "$file: includes \"$target\": $to is not below $layer"; bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cpp.in' \) | sort)
for d in src/*/; do
  d=${d#src/}; d=${d%/}
  [ "$d" = include ] || [ -n "${rank[$d]+x}" ] || { echo "src/$d/: a folder that is not a layer (add it to this script and the README)"; bad=1; }
done
if [ $bad -eq 0 ]; then echo "layers: $checked includes under src/, none climbs"; fi
exit $bad
