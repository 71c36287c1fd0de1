#!/usr/bin/env bash
# The GPU test suite, run on the GPU machine from a .gpu/ made by scripts/gpu_package, in the
# repository root: every CUDA test of engine_tests (kernels and the op-vs-CPU harness OpsVsCpu*
# against their CPU references, the CUDA model against the reference fixtures and the CPU
# backend), then the CLI with --backend cuda against --backend cpu on the bundled trained model.
# Logs go to $OUT when set.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$root/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${OUT:-/tmp}
bin="$root/.gpu/bin"
status=0
# The tests find tests/fixtures through the source path compiled in (the build machine's
# checkout, /work/main); point it at this checkout when it does not exist here.
if [[ ! -e /work/main ]]; then mkdir -p /work && ln -s "$root" /work/main; fi
(cd "$root" && timeout "${TEST_TIMEOUT:-400}" "$bin/engine_tests" \
    --gtest_filter="${GTEST_FILTER:-*Cuda*:*cuda*:*OpsVsCpu*}" >"$out/gpu_tests.log" 2>&1) || status=1
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|worst|differs|Failure" "$out/gpu_tests.log" | head -60
store=$(mktemp -d)/tiny-python
"$bin/cherenkov" prepare "$root/models/tiny-python" --output "$store" >/dev/null
for backend in cpu cuda; do
    "$bin/cherenkov" "$store" 'def is_prime(n):' --raw --max-tokens 64 --no-eos --drafts 2 \
        --backend "$backend" >"$out/text_$backend.txt" 2>"$out/run_$backend.log" || status=1
    grep -E "^(decode|mtp|backend)" "$out/run_$backend.log"
done
if cmp -s "$out/text_cpu.txt" "$out/text_cuda.txt"; then
    echo "tiny-python greedy text: cuda == cpu"
else
    echo "tiny-python greedy text differs between cuda and cpu"
    status=1
fi
exit $status
