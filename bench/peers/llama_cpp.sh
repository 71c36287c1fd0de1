#!/usr/bin/env bash
# Cherenkov beside llama.cpp on one GPU machine, on the same synthetic weights (issue 34;
# method and results in docs/benchmarks.md, "Side by side with llama.cpp").
#
#   bench/peers/llama_cpp.sh [--layers "4"] [--work DIR] [--binary PATH] [--out DIR]
#                            [--prompt 512] [--gen 128] [--until STEP] [--synthetic "FLAGS"]
#                            [--scratch DIR]
#
# For each layer count: writes a Flash-shaped BF16 checkpoint (bench/synthetic_store.py --bf16:
# 512 experts, top-10, hidden 2560, moe_intermediate 640, 3 GDN : 1 QSA, hc_count 4, PLE on one
# GDN layer, vocab 248320, seeded normal weights, Qwen2/3 tokenizer from tests/data), packs it
# with `cherenkov prepare`, converts it with llama.cpp's converter (to Q8_0, which keeps the disk
# peak at about 43 GB for 4 layers) and quantizes that to Q4_0 (the bit-for-bit match of
# Cherenkov's 4.5-bit records) and Q4_K_M (which falls back to Q5_0/Q8_0 on the 640-wide down
# projections), deleting each intermediate once it is used. Then both engines run the regimes:
# resident (all on the GPU), experts in host RAM at equal GPU memory for experts (25% and 50%),
# and Cherenkov's disk streaming (25% pool, O_DIRECT, page cache dropped), then both engines
# with the experts on disk under one memory limit (llama.cpp from mmap, bench/peers/memlimit.py),
# prompt 512 and generate 128; the table (bench/peers/peer_table.py) gives both engines'
# figures, the ratios, bytes per token and the HBM and disk limits measured in the same run.
#
# --scratch DIR puts the BF16 checkpoint and the Q8_0 intermediate there instead of --work: on a
# machine whose RAM disk holds them (/dev/shm), 12 layers (a 63 GB checkpoint) then need only the
# results on the 64 GB disk (about 57 GB: store, Q4_0, Q4_K_M).
# llama.cpp builds in the background while the first weights are written, packed and converted
# (peer_common.sh). Steps are skipped when their outputs exist in --work, and every result file
# appears only once complete, so a run cut by a time limit goes on where it stopped (`--until
# build|convert|quantize` stops there on purpose). Needs: nvcc, cmake,
# PyTorch and transformers (the converter), the llama.cpp source from
# bench/peers/fetch_llama_cpp.sh in .peers/, and a CUDA build of cherenkov (--binary).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
layers_list="4"
work=/tmp/cherenkov-peers
binary="$repo/build/cherenkov"
out=""
prompt=512
gen=128
until_step=""
synthetic=""  # extra bench/synthetic_store.py flags (e.g. a smaller shape to try the pipeline)
scratch=""    # where peer_weights puts its intermediates (peer_common.sh); empty: --work
while [[ $# -gt 0 ]]; do
    case $1 in
        --layers) layers_list=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --binary) binary=$(realpath "$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        --prompt) prompt=$2; shift 2 ;;
        --gen) gen=$2; shift 2 ;;
        --until) until_step=$2; shift 2 ;;
        --synthetic) synthetic=$2; shift 2 ;;
        --scratch) scratch=$2; shift 2 ;;
        *) echo "llama_cpp.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
out=${out:-$work/results}
mkdir -p "$work" "$out"
# shellcheck source=bench/peers/peer_common.sh
source "$repo/bench/peers/peer_common.sh"
converter_python=$("$repo/bench/peers/converter_env.sh")

# ---------------------------------------------------------------- machine facts (no hostnames)
{
    echo "card: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    echo "cpus: $(nproc)"
    echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "disk free: $(df -BG --output=avail "$work" | tail -1 | tr -d ' ')"
    echo "cherenkov: $(sha256sum "$binary" | cut -c1-16)"
    echo "llama.cpp: llama-cpp-python 0.3.36 vendored source"
    echo "torch: $("$converter_python" -c 'import torch; print(torch.__version__)') transformers: $(python3 -c 'import transformers; print(transformers.__version__)' 2>/dev/null)"
} >"$out/machine.txt"
cat "$out/machine.txt" >&2

# ---------------------------------------------------------------- llama.cpp
# Built in the background while the first layer count's weights are written and converted.
peer_llama_cpp -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
[[ "$until_step" == build ]] && { peer_wait_build; exit 0; }

for layers in $layers_list; do
    dir="$work/L$layers"
    res="$out/L$layers"
    mkdir -p "$dir" "$res"
    # ------------------------------------------------------------ weights in both forms
    # shellcheck disable=SC2086 # --synthetic is a list of flags
    peer_weights "$dir" "$res" "$layers" $synthetic
    [[ "$until_step" == quantize ]] && exit 0
    peer_wait_build
    # ------------------------------------------------------------ limits: HBM (once the build is done)
    if [[ ! -f "$out/limits.json" ]]; then
        python3 - "$out/limits.json" <<'PY'
import json, sys, time, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB read, 1 GiB written
y = torch.empty_like(x)
for _ in range(3):
    y.copy_(x)
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(20):
    y.copy_(x)
torch.cuda.synchronize()
seconds = time.perf_counter() - start
json.dump({"hbm_copy_gbps": 2 * 20 * x.numel() / seconds / 1e9}, open(sys.argv[1], "w"))
PY
    fi

    # ------------------------------------------------------------ llama.cpp
    bench="$llama/build/bin/llama-bench"
    common=(-p "$prompt" -n "$gen" -r 3 -o json)
    if [[ ! -s "$res/llama_resident.json" ]]; then
        peer_result "$res/llama_resident.json" "$res/llama_resident.log" \
            "$bench" -m "$dir/q4_0.gguf" -m "$dir/q4_k_m.gguf" -ngl 99 -fa 0,1 "${common[@]}"
    fi
    # A long prompt's prefill, resident (the issue's second prefill length): prompt only.
    if [[ ! -s "$res/llama_resident_long.json" ]]; then
        peer_result "$res/llama_resident_long.json" "$res/llama_resident_long.log" \
            "$bench" -m "$dir/q4_0.gguf" -m "$dir/q4_k_m.gguf" -ngl 99 -fa 1 -p 4096 -n 0 -r 3 -o json
    fi
    # Experts in host RAM at equal GPU memory: --n-cpu-moe keeps the experts of the first N
    # layers on the CPU (N = 3/4 and 1/2 of the layers), -ot exps=CPU all of them.
    quarter=$((layers * 3 / 4)); half=$((layers / 2))
    if [[ ! -s "$res/llama_host.json" ]]; then
        peer_result "$res/llama_host.json" "$res/llama_host.log" \
            "$bench" -m "$dir/q4_0.gguf" -ngl 99 -fa 1 -ncmoe "$quarter,$half" "${common[@]}"
    fi
    if [[ ! -s "$res/llama_host_all.json" ]]; then
        peer_result "$res/llama_host_all.json" "$res/llama_host_all.log" \
            "$bench" -m "$dir/q4_0.gguf" -ngl 99 -fa 1 -ot "exps=CPU" "${common[@]}"
    fi

    # ------------------------------------------------------------ Cherenkov
    table_gb=$(python3 -c "import os; print(os.path.getsize('$dir/store/experts.bin') / 1e9)")
    pool25=$(python3 -c "print(f'{$table_gb * (1 - $quarter / $layers):.3f}')")
    pool50=$(python3 -c "print(f'{$table_gb * (1 - $half / $layers):.3f}')")
    cbench() {  # cbench NAME FLAGS...
        local name=$1
        shift
        [[ -s "$res/cherenkov_$name.json" ]] && return 0
        peer_result "$res/cherenkov_$name.json" "$res/cherenkov_$name.log" \
            "$binary" bench "$dir/store" --backend cuda --prompt-tokens "$prompt" --gen-tokens "$gen" \
            --repeat 3 --json "$@" ||
            peer_log "cherenkov $name failed: $(tail -1 "$res/cherenkov_$name.log")"
    }
    cbench resident --pool-gb max
    cbench resident_q512 --pool-gb max --prefill-quantum 512
    if [[ ! -s "$res/cherenkov_resident_long.json" ]]; then
        peer_result "$res/cherenkov_resident_long.json" "$res/cherenkov_resident_long.log" \
            "$binary" bench "$dir/store" --backend cuda --prompt-tokens 4096 --gen-tokens 8 \
            --repeat 3 --json --pool-gb max || true
    fi
    # The default computes some decode misses on the CPU (--cpu-experts auto) with int8
    # activations (--cpu-activations auto; llama.cpp's CPU experts take them too); _f32 in float
    # there; _copy copies every miss.
    for share in 25 50; do
        pool_var="pool$share"
        cbench "host$share" --pool-gb "${!pool_var}" --host-pool-gb mapped
        cbench "host${share}_f32" --pool-gb "${!pool_var}" --host-pool-gb mapped --cpu-activations f32
        cbench "host${share}_copy" --pool-gb "${!pool_var}" --host-pool-gb mapped --cpu-experts off
    done
    if [[ ! -f "$res/disk.json" ]]; then
        # O_DIRECT read rates of the expert table; --evict then drops its pages from the page
        # cache, so the streaming run below reads the disk.
        peer_result "$res/disk.json" "$res/disk.log" \
            python3 "$repo/bench/disk_bandwidth.py" "$dir/store" --evict || true
    fi
    if [[ ! -s "$res/cherenkov_disk25.json" ]]; then
        # Disk streaming: the device pool holds 25%, misses read the store with O_DIRECT.
        peer_result "$res/cherenkov_disk25.json" "$res/cherenkov_disk25.log" \
            "$binary" bench "$dir/store" --backend cuda --prompt-tokens "$prompt" --gen-tokens 32 \
            --repeat 1 --json --pool-gb "$pool25" || true
    fi
    if [[ ! -s "$res/cherenkov_disk25_long.json" ]]; then
        # A 4,096-token prompt streamed the same way, the table's pages dropped again: with the
        # quantum unset the chunk grows beside the explicit pool, and the prompt reads the table
        # about once instead of once per 512 tokens.
        python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import memlimit; memlimit.evict(sys.argv[2])' \
            "$repo/bench/peers" "$dir/store/experts.bin"
        peer_result "$res/cherenkov_disk25_long.json" "$res/cherenkov_disk25_long.log" \
            "$binary" bench "$dir/store" --backend cuda --prompt-tokens 4096 --gen-tokens 8 \
            --repeat 1 --json --pool-gb "$pool25" || true
    fi
    # ------------------------------------------------------------ experts from disk, memory-limited
    # llama.cpp with every layer's experts on the CPU (-ot exps=CPU) where it mapped them
    # (--repack 0: a repacked model lives in anonymous memory), under a memory cgroup
    # (bench/peers/memlimit.py) that holds its own memory, the GGUF's dense tensors and 25% of its
    # expert tensors, the GGUF's pages evicted first: a machine whose RAM cannot hold the experts,
    # where the kernel's page cache streams them. Cherenkov's disk streaming (the same 25% device
    # pool as disk25) runs under the same limit. Skipped, with the reason, where no cgroup can be made.
    memlimit="$repo/bench/peers/memlimit.py"
    if "$memlimit" --check >/dev/null 2>"$res/stream_skipped.txt"; then
        rm -f "$res/stream_skipped.txt"
        stream_llama=(-m "$dir/q4_0.gguf" -ngl 99 -fa 1 -ot "exps=CPU" --repack 0)
        if [[ ! -s "$res/llama_probe_mem.json" ]]; then
            # llama.cpp's own memory beside the mapped weights: its anonymous peak, unlimited.
            "$memlimit" --report "$res/llama_probe_mem.json" -- "$bench" "${stream_llama[@]}" \
                -p "$prompt" -n 2 -r 1 -o json >/dev/null 2>"$res/llama_probe.log" || true
        fi
        if limit=$(peer_stream_limit "$dir/q4_0.gguf" "$res/llama_probe_mem.json" 25 "$res/stream_limit.json"); then
            peer_log "L$layers stream limit: $((limit >> 20)) MiB"
            if [[ ! -s "$res/llama_stream.json" ]]; then
                peer_result "$res/llama_stream.json" "$res/llama_stream.log" \
                    "$memlimit" --limit "$limit" --evict "$dir/q4_0.gguf" --report "$res/llama_stream_mem.json" -- \
                    "$bench" "${stream_llama[@]}" -p "$prompt" -n 32 -r 1 -o json || true
            fi
            evict=()
            for file in "$dir"/store/*; do evict+=(--evict "$file"); done
            if [[ ! -s "$res/cherenkov_stream.json" ]]; then
                peer_result "$res/cherenkov_stream.json" "$res/cherenkov_stream.log" \
                    "$memlimit" --limit "$limit" "${evict[@]}" --report "$res/cherenkov_stream_mem.json" -- \
                    "$binary" bench "$dir/store" --backend cuda --prompt-tokens "$prompt" --gen-tokens 32 \
                    --repeat 1 --json --pool-gb "$pool25" || true
            fi
        else
            peer_log "L$layers stream regime skipped: no limit keeps llama.cpp's experts out of RAM"
        fi
    else
        peer_log "L$layers stream regime skipped: $(cat "$res/stream_skipped.txt")"
    fi
    python3 "$repo/bench/peers/peer_table.py" "$out" "$layers" "$dir/store" | tee "$res/table.md"
done
