#!/usr/bin/env bash
# Cherenkov's CPU backend beside llama.cpp's CPU build on one machine, on the same synthetic
# weights (issue 34; method and results in docs/benchmarks.md, "Side by side with llama.cpp").
#
#   bench/peers/llama_cpp_cpu.sh [--binary PATH] [--experts 128] [--layers 4] [--work DIR]
#       [--out DIR] [--prompt 128] [--gen 32] [--repeat 3] [--threads N] [--stream-share 25]
#       [--max-load 0.5] [--quiet-wait 600] [--marker FILE] [--until STEP]
#
# The checkpoint has Flash's per-token shape (hidden 2560, moe_intermediate 640, top-10, hc_count
# 4, 3 GDN : 1 QSA, PLE on one GDN layer, vocab 248320) with fewer experts (--experts), so a decode
# token reads the same bytes as Flash's while the files fit a small machine. Weights are made as
# in bench/peers/llama_cpp.sh (bench/peers/peer_common.sh: BF16 checkpoint, `cherenkov prepare`,
# llama.cpp's converter to Q8_0, llama-quantize to Q4_0 and Q4_K_M); llama.cpp is built for the
# CPU only (GGML_CUDA=OFF, native), and the converter's PyTorch comes from
# bench/peers/converter_env.sh when python3 lacks it. Regimes, both engines on --threads threads:
#   ram     everything in RAM: llama.cpp -ngl 0 (the GGUF mapped, its pages cached) with its
#           weights repacked at load (--repack 1, the default) and used where mapped (--repack 0),
#           Cherenkov --backend cpu with an expert cache that holds every expert (--pool-gb max)
#           and with the expert table used in place from the page cache (--pool-gb mapped), and
#           with int8 activations (--cpu-activations q8) and the cache;
#   stream  experts mostly on disk, when a memory cgroup can be made (bench/peers/memlimit.py):
#           llama.cpp from mmap (--repack 0: a repacked model lives in anonymous memory) under a
#           memory limit of its anonymous peak + the GGUF's dense tensors but the embedding
#           tables + --stream-share % of its expert tensors, the GGUF's pages evicted first;
#           Cherenkov under the same limit with a cache of --stream-share % of the expert table,
#           reading misses with O_DIRECT, the store's pages evicted first (f32 and q8 activations).
# The memory bandwidth limit (a 1 GiB copy, read + write bytes a second) is measured in the same
# run. Each regime first waits (up to --quiet-wait s) for the 1-minute load average to fall below
# --max-load, records /proc/loadavg before and after, and keeps --marker (when given) in place
# while it measures, so other jobs on a shared machine can hold off. Steps whose outputs exist
# are skipped (delete a result file to measure it again); `--until build|convert|quantize` stops
# early. bench/peers/peer_table.py --cpu prints the table.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
binary="$repo/build-cpu/cherenkov"
experts=128
layers=4
work=/tmp/cherenkov-peers-cpu
out=""
prompt=128
gen=32
repeat=3
threads=$(nproc)
stream_share=25
max_load=0.5
quiet_wait=600
marker=""
until_step=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --binary) binary=$(realpath "$2"); shift 2 ;;
        --experts) experts=$2; shift 2 ;;
        --layers) layers=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --prompt) prompt=$2; shift 2 ;;
        --gen) gen=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --stream-share) stream_share=$2; shift 2 ;;
        --max-load) max_load=$2; shift 2 ;;
        --quiet-wait) quiet_wait=$2; shift 2 ;;
        --marker) marker=$2; shift 2 ;;
        --until) until_step=$2; shift 2 ;;
        *) echo "llama_cpp_cpu.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -x "$binary" ]] || { echo "llama_cpp_cpu.sh: no cherenkov binary at $binary (--binary)" >&2; exit 2; }
out=${out:-$work/results}
tag="E$experts-L$layers"
dir="$work/$tag"
res="$out/$tag"
mkdir -p "$work" "$out" "$dir" "$res"
# shellcheck source=bench/peers/peer_common.sh
source "$repo/bench/peers/peer_common.sh"
converter_python=$("$repo/bench/peers/converter_env.sh")

# ---------------------------------------------------------------- machine facts (no hostnames)
{
    echo "cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "cpus: $(nproc)"
    echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "disk free: $(df -BG --output=avail "$work" | tail -1 | tr -d ' ')"
    echo "kernel: $(uname -r)"
    echo "cherenkov: $(sha256sum "$binary" | cut -c1-16)"
    echo "llama.cpp: llama-cpp-python 0.3.36 vendored source, CPU build (GGML_NATIVE)"
    echo "torch: $("$converter_python" -c 'import torch; print(torch.__version__)' 2>/dev/null) transformers: $(python3 -c 'import transformers; print(transformers.__version__)' 2>/dev/null)"
    echo "memory cgroup: $("$repo/bench/peers/memlimit.py" --check 2>&1 || true)"
} >"$out/machine.txt"
cat "$out/machine.txt" >&2

peer_llama_cpp -DGGML_CUDA=OFF -DGGML_NATIVE=ON
[[ "$until_step" == build ]] && { peer_wait_build; exit 0; }
peer_weights "$dir" "$res" "$layers" --experts "$experts"
[[ "$until_step" == quantize ]] && exit 0
peer_wait_build

# ---------------------------------------------------------------- measuring
measuring_end() { [[ -z "$marker" ]] || rm -f "$marker"; }
trap measuring_end EXIT
# measure REGIME CMD...: waits for a quiet machine, runs CMD with the marker in place, and
# appends "REGIME before <loadavg> after <loadavg>" to $res/load.txt.
measure() {
    local regime=$1 waited=0 before
    shift
    while python3 -c "import sys; sys.exit(float(open('/proc/loadavg').read().split()[0]) < $max_load)" &&
        ((waited < quiet_wait)); do
        sleep 10
        waited=$((waited + 10))
    done
    [[ -z "$marker" ]] || touch "$marker"
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    peer_log "$regime: load $before (waited ${waited}s)"
    "$@"
    measuring_end
    echo "$regime before $before after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/load.txt"
}

if [[ ! -s "$out/limits.json" ]]; then
    limits() {
        python3 - "$out/limits.json" <<'PY'
import json, sys, time
import numpy as np
x = np.ones(1 << 30, dtype=np.uint8)  # 1 GiB read, 1 GiB written a copy
y = np.empty_like(x)
for _ in range(2):
    np.copyto(y, x)
best = 0.0
for _ in range(5):
    start = time.perf_counter()
    np.copyto(y, x)
    best = max(best, 2 * x.nbytes / (time.perf_counter() - start) / 1e9)
json.dump({"ram_copy_gbps": best}, open(sys.argv[1], "w"))
PY
    }
    measure limits limits
fi
bench="$llama/build/bin/llama-bench"
memlimit="$repo/bench/peers/memlimit.py"
common=(-ngl 0 -t "$threads" -p "$prompt" -n "$gen" -r "$repeat" -o json)
run_into() {  # run_into BASE CMD...: stdout into BASE.json (kept only when CMD succeeds), stderr into BASE.log
    local base=$1
    shift
    peer_result "$base.json" "$base.log" "$@" || peer_log "$(basename "$base") failed: $(tail -1 "$base.log")"
}
cherenkov=("$binary" bench "$dir/store" --backend cpu --threads "$threads" --prompt-tokens "$prompt"
    --gen-tokens "$gen" --repeat "$repeat" --json)

# ---------------------------------------------------------------- everything in RAM
[[ -s "$res/llama_ram.json" ]] || measure llama_ram run_into "$res/llama_ram" "$bench" -m "$dir/q4_0.gguf" -m "$dir/q4_k_m.gguf" \
    --repack 1,0 "${common[@]}"
[[ -s "$res/cherenkov_ram.json" ]] || measure cherenkov_ram run_into "$res/cherenkov_ram" "${cherenkov[@]}" --pool-gb max
[[ -s "$res/cherenkov_mapped.json" ]] || measure cherenkov_mapped run_into "$res/cherenkov_mapped" "${cherenkov[@]}" --pool-gb mapped
[[ -s "$res/cherenkov_ram_q8.json" ]] ||
    measure cherenkov_ram_q8 run_into "$res/cherenkov_ram_q8" "${cherenkov[@]}" --pool-gb max --cpu-activations q8

# ---------------------------------------------------------------- experts streamed from disk
if ! "$memlimit" --check >/dev/null 2>"$res/stream_skipped.txt"; then
    peer_log "stream regime skipped: $(cat "$res/stream_skipped.txt")"
    exit 0
fi
rm -f "$res/stream_skipped.txt"
# llama.cpp's CPU backend repacks Q4_0 matrices, the experts' included, into its interleaved
# layout in anonymous memory at load (--repack 1, the default), and a repacked model no longer
# reads its file: no limit would keep the experts out of RAM. The streamed runs keep the weights
# where llama.cpp mapped them (--repack 0); the in-RAM regime shows what that costs.
stream_llama=(-m "$dir/q4_0.gguf" -ngl 0 -t "$threads" --repack 0)
if [[ ! -s "$res/llama_probe_mem.json" ]]; then
    # llama.cpp's own memory beside the mapped weights (compute buffers, KV cache): its
    # anonymous peak over one short run, unlimited.
    "$memlimit" --report "$res/llama_probe_mem.json" -- "$bench" "${stream_llama[@]}" \
        -p "$prompt" -n 2 -r 1 -o json >/dev/null 2>"$res/llama_probe.log"
fi
# The limit: that anonymous peak, the GGUF's dense tensors but the row-gathered embedding tables
# (one row a token), and --stream-share % of its expert tensors. Cherenkov runs under the same one.
limit=$(peer_stream_limit "$dir/q4_0.gguf" "$res/llama_probe_mem.json" "$stream_share" "$res/stream_limit.json")
peer_log "stream limit: $((limit >> 20)) MiB ($(cat "$res/stream_limit.json"))"
if [[ ! -s "$res/disk.json" ]]; then
    peer_result "$res/disk.json" "$res/disk.log" python3 "$repo/bench/disk_bandwidth.py" "$dir/store" || true
fi
pool=$(python3 -c "import os; print(f'{os.path.getsize(\"$dir/store/experts.bin\") * $stream_share / 100 / 1e9:.3f}')")
[[ -s "$res/llama_stream.json" ]] ||
    measure llama_stream run_into "$res/llama_stream" "$memlimit" --limit "$limit" --evict "$dir/q4_0.gguf" \
        --report "$res/llama_stream_mem.json" -- "$bench" "${stream_llama[@]}" -p "$prompt" -n "$gen" -r "$repeat" -o json
# Every file of the store leaves the page cache, so its dense weights count against the limit too.
evict=()
for file in "$dir"/store/*; do evict+=(--evict "$file"); done
[[ -s "$res/cherenkov_stream.json" ]] ||
    measure cherenkov_stream run_into "$res/cherenkov_stream" "$memlimit" --limit "$limit" \
        "${evict[@]}" --report "$res/cherenkov_stream_mem.json" -- "${cherenkov[@]}" --pool-gb "$pool"
[[ -s "$res/cherenkov_stream_q8.json" ]] ||
    measure cherenkov_stream_q8 run_into "$res/cherenkov_stream_q8" "$memlimit" --limit "$limit" \
        "${evict[@]}" --report "$res/cherenkov_stream_q8_mem.json" -- "${cherenkov[@]}" --pool-gb "$pool" \
        --cpu-activations q8
python3 "$repo/bench/peers/peer_table.py" --cpu "$out" "$tag" "$dir/store" | tee "$res/table.md"
