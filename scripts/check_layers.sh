#!/usr/bin/env bash
# Fails when a source file includes a header from a higher layer (docs/design.md: dependencies
# point down: base < model_data < store < text < engine < serving < cli), or when CUDA
# appears outside src/engine/cuda/.
set -euo pipefail
cd "$(dirname "$0")/.."
rank() {
  case "$1" in
    base) echo 0 ;; model_data) echo 1 ;; store) echo 2 ;; text) echo 3 ;;
    engine) echo 4 ;; serving) echo 5 ;; cli) echo 6 ;; *) echo -1 ;;
  esac
}
status=0
while IFS= read -r file; do
  layer=$(echo "$file" | cut -d/ -f2)
  own=$(rank "$layer")
  while IFS= read -r included; do
    target=$(echo "$included" | cut -d/ -f1)
    other=$(rank "$target")
    if [ "$other" -gt "$own" ]; then
      echo "layer violation: $file ($layer) includes $included ($target)" >&2
      status=1
    fi
  done < <(grep -oE '^#include "[a-z_]+/[^"]+"' "$file" | sed -E 's/#include "([^"]+)"/\1/')
  case "$file" in
    src/engine/cuda/*) ;;
    *) if grep -qE 'CHERENKOV_CUDA|cuda_runtime' "$file"; then
         echo "CUDA outside src/engine/cuda/: $file" >&2; status=1
       fi ;;
  esac
done < <(find src -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | sort)
if [ $status -eq 0 ]; then echo "layers: ok"; fi
exit $status
