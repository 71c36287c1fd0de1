#!/usr/bin/env bash
# Fails when a source file includes a header from a higher layer (docs/design.md: dependencies
# point down: base < model_data < store < text < engine < serving < cli), when CUDA
# appears outside src/engine/cuda/, or when src/engine/cuda/ composes the model itself instead of
# supplying ops to the one composition in src/engine/model/ (docs/engine.md "One composition").
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
# The composition is engine/model's: the CUDA backend includes none of the CPU model's headers,
# implements none of ModelBackend's composing calls, and records none of the stage names only a
# composition records (a decoder layer's hyper-connection and residual stages, the MTP input's,
# the heads').
composition='"(attn_hc\.|mlp_hc\.|mixer_out"|x_mid"|x_out"|final_hidden"|e_hat"|h_hat"|mtp\.r_prime"|mtp\.mixer_out")'
while IFS= read -r file; do
  if grep -qE '^#include "engine/model/(layers|model|cpu_backend|decoder_layer)\.h"' "$file"; then
    echo "model composition in the CUDA backend: $file includes the CPU model's composition" >&2
    status=1
  fi
  if grep -qE '(ForwardResult|MtpResult|void) +([A-Za-z_]+::)?(forward|mtp_catch_up|mtp_chain|commit|decoder_layer) *\(' "$file"; then
    echo "model composition in the CUDA backend: $file implements a composing call" >&2
    status=1
  fi
  if grep -qE "$composition" "$file"; then
    echo "model composition in the CUDA backend: $file records a composition's stage names" >&2
    status=1
  fi
done < <(find src/engine/cuda -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | sort)
if [ $status -eq 0 ]; then echo "layers: ok"; fi
exit $status
