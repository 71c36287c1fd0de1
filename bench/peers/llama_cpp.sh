#!/usr/bin/env bash
# Cherenkov beside llama.cpp on one GPU machine, on the same synthetic weights (issue 34;
# method and results in docs/benchmarks.md, "Side by side with llama.cpp").
#
#   bench/peers/llama_cpp.sh [--layers "4"] [--work DIR] [--binary PATH] [--out DIR]
#                            [--prompt 512] [--gen 128] [--until STEP] [--synthetic "FLAGS"]
#
# For each layer count: writes a Flash-shaped BF16 checkpoint (bench/synthetic_store.py --bf16:
# 512 experts, top-10, hidden 2560, moe_intermediate 640, 3 GDN : 1 QSA, hc_count 4, PLE on one
# GDN layer, vocab 248320, seeded normal weights, Qwen2/3 tokenizer from tests/data), packs it
# with `cherenkov prepare`, converts it with llama.cpp's converter (to Q8_0, which keeps the disk
# peak at about 43 GB for 4 layers) and quantizes that to Q4_0 (the bit-for-bit match of
# Cherenkov's 4.5-bit records) and Q4_K_M (which falls back to Q5_0/Q8_0 on the 640-wide down
# projections), deleting each intermediate once it is used. Then both engines run the regimes:
# resident (all on the GPU), experts in host RAM at equal GPU memory for experts (25% and 50%),
# and Cherenkov's disk streaming (25% pool, O_DIRECT, page cache dropped), prompt 512 and
# generate 128; the table (bench/peers/peer_table.py) gives both engines' figures, the ratios,
# bytes per token and the HBM and disk limits measured in the same run.
#
# Steps are skipped when their outputs exist in --work, so a run cut by a time limit goes on
# where it stopped (`--until convert` stops after the conversion on purpose). Needs: nvcc, cmake,
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
        *) echo "llama_cpp.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
out=${out:-$work/results}
mkdir -p "$work" "$out"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
timed() {  # timed NAME CMD...: runs CMD, appends "NAME seconds" to $out/steps.txt
    local name=$1 start end
    shift
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    echo "$name $(python3 -c "print(f'{$end - $start:.1f}')")" | tee -a "$out/steps.txt" >&2
}

# ---------------------------------------------------------------- machine facts (no hostnames)
{
    echo "card: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    echo "cpus: $(nproc)"
    echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "disk free: $(df -BG --output=avail "$work" | tail -1 | tr -d ' ')"
    echo "cherenkov: $(sha256sum "$binary" | cut -c1-16)"
    echo "llama.cpp: llama-cpp-python 0.3.36 vendored source"
    echo "torch: $(python3 -c 'import torch; print(torch.__version__)') transformers: $(python3 -c 'import transformers; print(transformers.__version__)')"
} >"$out/machine.txt"
cat "$out/machine.txt" >&2

# ---------------------------------------------------------------- llama.cpp
llama="$work/llama.cpp"
if [[ ! -x "$llama/build/bin/llama-bench" ]]; then
    tarball=$(ls "$repo"/.peers/llama.cpp-*.tar.xz 2>/dev/null | tail -1)
    [[ -n "$tarball" ]] || { echo "no .peers/llama.cpp-*.tar.xz: run bench/peers/fetch_llama_cpp.sh" >&2; exit 1; }
    rm -rf "$llama"
    tar xJf "$tarball" -C "$work"
    generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
    timed build_llama_cpp bash -c "cmake -S '$llama' -B '$llama/build' -G '$generator' -DCMAKE_BUILD_TYPE=Release \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null && \
        cmake --build '$llama/build' -j '$(nproc)' --target llama-bench llama-quantize >/dev/null"
fi
# llama.cpp's converter gives a layer its QSA compress ratio only where layer_types says
# "full_attention", but transformers' config class renames that entry (qwen_sparse_attention in
# 5.17, indexed_attention in 5.23), and the GGUF then silently runs QSA as dense attention. Accept
# every spelling (the GGUF's attention.compress_ratios is checked after conversion).
sed -i 's/if layer_types\[i\] == "full_attention" else 0/if layer_types[i] in ("full_attention", "qwen_sparse_attention", "indexed_attention") else 0/' \
    "$llama/conversion/qwen4exp.py"
grep -q '"indexed_attention") else 0' "$llama/conversion/qwen4exp.py" ||
    { echo "llama_cpp.sh: the converter's compress-ratio line has changed; look at conversion/qwen4exp.py" >&2; exit 1; }
[[ "$until_step" == build ]] && exit 0

# ---------------------------------------------------------------- limits: HBM and disk
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

for layers in $layers_list; do
    dir="$work/L$layers"
    res="$out/L$layers"
    mkdir -p "$dir" "$res"
    # ------------------------------------------------------------ weights in both forms
    if [[ ! -f "$dir/q4_0.gguf" || ! -f "$dir/store/manifest.json" ]]; then
        if [[ ! -f "$dir/ckpt/config.json" && ! -f "$dir/q8_0.gguf" ]]; then
            timed "L$layers write_checkpoint" python3 "$repo/bench/synthetic_store.py" "$dir/ckpt" --bf16 \
                --layers "$layers" --vocab 248320 --tokenizer "$repo/tests/data/tokenizer-qwen2-qwen3" $synthetic
        fi
        if [[ ! -f "$dir/store/manifest.json" ]]; then
            timed "L$layers cherenkov_prepare" "$binary" prepare "$dir/ckpt" --output "$dir/store" >/dev/null
        fi
        if [[ ! -f "$dir/q8_0.gguf" ]]; then
            timed "L$layers llama_convert" python3 "$llama/convert_hf_to_gguf.py" "$dir/ckpt" \
                --outtype q8_0 --outfile "$dir/q8_0.gguf.partial" >"$res/convert.log" 2>&1
            mv "$dir/q8_0.gguf.partial" "$dir/q8_0.gguf"
        fi
        rm -rf "$dir/ckpt"
        # The QSA layer must reach llama.cpp as sparse attention (issue 34's trap).
        PYTHONPATH="$llama/gguf-py" python3 - "$dir/q8_0.gguf" >"$res/compress_ratios.txt" <<'PY'
import sys, gguf
reader = gguf.GGUFReader(sys.argv[1])
field = next(f for name, f in reader.fields.items() if name.endswith("attention.compress_ratios"))
print([int(field.parts[i][0]) for i in field.data])
PY
        log "L$layers compress ratios: $(cat "$res/compress_ratios.txt")"
        grep -q '[1-9]' "$res/compress_ratios.txt" ||
            { echo "llama_cpp.sh: the GGUF has no QSA compress ratio; it would run QSA as dense attention" >&2; exit 1; }
        [[ "$until_step" == convert ]] && exit 0
        for type in Q4_0 Q4_K_M; do
            lower=$(echo "$type" | tr 'A-Z' 'a-z')
            if [[ ! -f "$dir/$lower.gguf" ]]; then
                timed "L$layers llama_quantize_$type" "$llama/build/bin/llama-quantize" --allow-requantize \
                    "$dir/q8_0.gguf" "$dir/$lower.gguf.partial" "$type" >"$res/quantize_$lower.log" 2>&1
                mv "$dir/$lower.gguf.partial" "$dir/$lower.gguf"
            fi
        done
        rm -f "$dir/q8_0.gguf"
    fi
    [[ "$until_step" == quantize ]] && exit 0

    # ------------------------------------------------------------ llama.cpp
    bench="$llama/build/bin/llama-bench"
    common=(-p "$prompt" -n "$gen" -r 3 -o json)
    if [[ ! -s "$res/llama_resident.json" ]]; then
        "$bench" -m "$dir/q4_0.gguf" -m "$dir/q4_k_m.gguf" -ngl 99 -fa 0,1 "${common[@]}" \
            >"$res/llama_resident.json" 2>"$res/llama_resident.log"
    fi
    # Experts in host RAM at equal GPU memory: --n-cpu-moe keeps the experts of the first N
    # layers on the CPU (N = 3/4 and 1/2 of the layers), -ot exps=CPU all of them.
    quarter=$((layers * 3 / 4)); half=$((layers / 2))
    if [[ ! -s "$res/llama_host.json" ]]; then
        "$bench" -m "$dir/q4_0.gguf" -ngl 99 -fa 1 -ncmoe "$quarter,$half" "${common[@]}" \
            >"$res/llama_host.json" 2>"$res/llama_host.log"
    fi
    if [[ ! -s "$res/llama_host_all.json" ]]; then
        "$bench" -m "$dir/q4_0.gguf" -ngl 99 -fa 1 -ot "exps=CPU" "${common[@]}" \
            >"$res/llama_host_all.json" 2>"$res/llama_host_all.log"
    fi

    # ------------------------------------------------------------ Cherenkov
    table_gb=$(python3 -c "import os; print(os.path.getsize('$dir/store/experts.bin') / 1e9)")
    pool25=$(python3 -c "print(f'{$table_gb * (1 - $quarter / $layers):.3f}')")
    pool50=$(python3 -c "print(f'{$table_gb * (1 - $half / $layers):.3f}')")
    cbench() {  # cbench NAME FLAGS...
        local name=$1
        shift
        [[ -s "$res/cherenkov_$name.json" ]] && return 0
        "$binary" bench "$dir/store" --backend cuda --prompt-tokens "$prompt" --gen-tokens "$gen" \
            --repeat 3 --json "$@" >"$res/cherenkov_$name.json" 2>"$res/cherenkov_$name.log" ||
            { log "cherenkov $name failed: $(tail -1 "$res/cherenkov_$name.log")"; rm -f "$res/cherenkov_$name.json"; }
    }
    cbench resident --pool-gb max
    cbench resident_q512 --pool-gb max --prefill-quantum 512
    cbench host25 --pool-gb "$pool25" --host-pool-gb mapped
    cbench host50 --pool-gb "$pool50" --host-pool-gb mapped
    if [[ ! -f "$res/disk.json" ]]; then
        # O_DIRECT read rates of the expert table; --evict then drops its pages from the page
        # cache, so the streaming run below reads the disk.
        python3 "$repo/bench/disk_bandwidth.py" "$dir/store" --evict >"$res/disk.json" || rm -f "$res/disk.json"
    fi
    if [[ ! -s "$res/cherenkov_disk25.json" ]]; then
        # Disk streaming: the device pool holds 25%, misses read the store with O_DIRECT.
        "$binary" bench "$dir/store" --backend cuda --prompt-tokens "$prompt" --gen-tokens 32 \
            --repeat 1 --json --pool-gb "$pool25" >"$res/cherenkov_disk25.json" 2>"$res/cherenkov_disk25.log" ||
            rm -f "$res/cherenkov_disk25.json"
    fi
    python3 "$repo/bench/peers/peer_table.py" "$out" "$layers" "$dir/store" | tee "$res/table.md"
done
