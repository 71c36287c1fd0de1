#!/usr/bin/env bash
# Profiles the CUDA backend on the GPU machine (from a .gpu/ made by scripts/gpu_package), for
# kernel work rather than for reported figures (bench/cuda_bench.sh gives those):
#   bench/cuda_profile.sh OUT_DIR [gemv|prefill|decode|all]
# gemv:    the decode GEMV bench, then ncu on the routed-expert kernels (speed of light, occupancy,
#          scheduler and warp-state sections) and the instruction mix of their SASS;
# prefill: per-kernel GPU time (ncu gpu__time_duration) of `cherenkov bench` on a 4-layer
#          synthetic store, summed by kernel name, prefill and decode together;
# decode:  the same with a 16-token prompt and 24 generated tokens, so decode steps dominate.
# timeline: a CUPTI trace (bench/cuda_timeline.cpp, loaded through CUDA_INJECTION64_PATH) of a
#          512-token prefill and 64 decode steps on the 4-layer store with the 248,320-token
#          vocabulary, experts resident and then a quarter of them on the device (the rest from a
#          mapped host table), each cut into steps by bench/cuda_timeline.py: wall, device busy,
#          kernels, copies, host syncs and the idle gaps with what the host did in them.
#          Not part of "all". The untraced figures of the same runs are printed beside.
#          TIMELINE_STORE=DIR traces that store instead (bench/peers/llama_cpp.sh's L4/store).
# ncu runs with --clock-control none: the card's clocks are left as they are.
set -euo pipefail
out=$1
what=${2:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.gpu/bin"
export LD_LIBRARY_PATH="$root/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
ncu_flags=(--clock-control none --graph-profiling node)

if [[ $what == gemv || $what == all ]]; then
    "$bin/gemv_cuda_bench" --quick | tee "$out/gemv_bench.txt"
    # The first expert launches of the 1-row run: gate/up, down and combine of a few layers.
    ncu "${ncu_flags[@]}" --kernel-name regex:'affine_gemv_kernel|experts' --launch-skip 200 \
        --launch-count 6 --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        "$bin/gemv_cuda_bench" --quick >"$out/gemv_ncu.txt" 2>&1 || true
    if command -v cuobjdump >/dev/null; then
        cuobjdump --dump-sass "$bin/gemv_cuda_bench" >"$out/gemv.sass" 2>/dev/null || true
    fi
fi

# kernel_times NAME PROMPT GEN: per-kernel GPU time of one `cherenkov bench` run, by kernel name.
kernel_times() {
    local name=$1 prompt=$2 gen=$3
    local store_root=/tmp/cherenkov-profile
    if [[ ! -d $store_root/store ]]; then
        "$root/bench/make_synthetic_store.sh" "$store_root" 4 512 "$bin/cherenkov"
    fi
    "$bin/cherenkov" bench "$store_root/store" --backend cuda --pool-gb max --prompt-tokens "$prompt" \
        --gen-tokens "$gen" --repeat 2 2>&1 | tail -5 | tee "$out/bench_$name.txt"
    ncu "${ncu_flags[@]}" --metrics gpu__time_duration.sum --csv --print-units base \
        "$bin/cherenkov" bench "$store_root/store" --backend cuda --pool-gb max \
        --prompt-tokens "$prompt" --gen-tokens "$gen" --repeat 1 >"$out/${name}_ncu.csv" \
        2>"$out/${name}_ncu.log" || true
    python3 - "$out/${name}_ncu.csv" <<'PY' | tee "$out/${name}_kernels.txt"
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
name_i, value_i = head.index("Kernel Name"), head.index("Metric Value")
total = collections.Counter()
count = collections.Counter()
for r in rows[1:]:
    try:
        ns = float(r[value_i].replace(",", ""))
    except ValueError:
        continue
    name = r[name_i].split("(")[0].split("<")[0].split("::")[-1]
    total[name] += ns
    count[name] += 1
all_ns = sum(total.values())
print(f"{'kernel':48s} {'calls':>7s} {'ms':>9s} {'share':>6s}")
for name, ns in total.most_common(30):
    print(f"{name[:48]:48s} {count[name]:7d} {ns / 1e6:9.3f} {100 * ns / all_ns:5.1f}%")
print(f"total {all_ns / 1e6:.3f} ms over {sum(count.values())} kernels")
PY
}

# timeline NAME BENCH_FLAGS...: one traced and one untraced `cherenkov bench` of the timeline store.
timeline() {
    local name=$1
    shift
    local store=${TIMELINE_STORE:-/tmp/cherenkov-timeline/store}
    if [[ -z ${TIMELINE_STORE:-} ]]; then
        "$root/bench/make_synthetic_store.sh" /tmp/cherenkov-timeline 4 512 "$bin/cherenkov" \
            --vocab 248320
    fi
    local flags=(bench "$store" --backend cuda --prompt-tokens 512 --gen-tokens 64 --repeat 2 "$@")
    "$bin/cherenkov" "${flags[@]}" >"$out/bench_${name}_untraced.txt" 2>&1
    grep -E "^(model|prefill)" "$out/bench_${name}_untraced.txt" || true
    CUDA_INJECTION64_PATH="$root/.gpu/lib/libcuda_timeline.so" CK_TIMELINE_OUT="$out/$name.tsv" \
        "$bin/cherenkov" "${flags[@]}" >"$out/bench_${name}_traced.txt" 2>&1
    python3 "$root/bench/cuda_timeline.py" "$out/$name.tsv" --json "$out/$name.json" \
        | tee "$out/${name}_timeline.txt"
}

if [[ $what == timeline ]]; then
    timeline resident --pool-gb max
    timeline host25 --pool-gb 1.415 --host-pool-gb mapped
fi
if [[ $what == prefill || $what == all ]]; then kernel_times prefill 256 16; fi
if [[ $what == decode || $what == all ]]; then kernel_times decode 16 24; fi
