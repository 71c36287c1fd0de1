#!/usr/bin/env bash
# CUDA backend benchmark on a synthetic FN-shaped store (issue 9):
#   bench/cuda_bench.sh [OUT_ROOT]                        (default /tmp/cherenkov-cuda-bench)
# 1. bench/make_synthetic_store.sh: LAYERS (16) x 512 experts, top-10, hidden 2560, I 640, random
#    4-bit codes written directly, packed with `cherenkov prepare`;
# 2. the disk's raw O_DIRECT bandwidth on experts.bin (bench/disk_bandwidth.py), same run;
# 3. `cherenkov bench --backend cuda --json` in four regimes:
#    resident  --pool-gb max: the device pool holds every expert (run 1 fills it, run 2 is warm);
#    sampled   the same, decoding with --temperature 0.8 --top-p 0.95 (selection on the device);
#    streaming --pool-gb POOL_GB (16), experts.bin evicted from the page cache, O_DIRECT reads;
#    ram tier  --pool-gb POOL_GB --buffered-io with experts.bin in the page cache;
#    ram mapped --pool-gb POOL_GB --host-pool-gb mapped: experts.bin (in the page cache) mapped,
#              page-locked, and the device pool's misses copied straight from it;
# 4. a table: prefill / decode tok/s, device hit rate, expert bytes read from the store per decode
#    token, the read rate that implies against the disk's, the disk-bound decode rate, and the GPU
#    stage coverage of decode calls (the share of their GPU timeline with queued work);
# 5. the resident expert GEMV's share of HBM bandwidth (bench/gemv_cuda_bench --experts, Q4, 1-4
#    rows), when that bench sits beside the binary (.gpu/bin) or in its build tree (bench/).
# Environment: CHERENKOV_BIN (build/cherenkov), LAYERS, POOL_GB, PROMPT_TOKENS (64), GEN_TOKENS
# (32), KEEP=1 keeps the store, BACKEND (cuda; cpu runs the same steps without a GPU, to check
# the script), REGIMES (default "resident sampled streaming ram_tier ram_mapped": the ones to run).
set -euo pipefail
root=${1:-/tmp/cherenkov-cuda-bench}
bin=${CHERENKOV_BIN:-build/cherenkov}
layers=${LAYERS:-16}
pool=${POOL_GB:-16}
prompt_tokens=${PROMPT_TOKENS:-64}
gen_tokens=${GEN_TOKENS:-32}
backend=${BACKEND:-cuda}
here=$(cd "$(dirname "$0")" && pwd)
cleanup() {
    if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$root/source" "$root/store"; fi
}
trap cleanup EXIT

"$here/make_synthetic_store.sh" "$root" "$layers" 512 "$bin"
python3 "$here/disk_bandwidth.py" "$root/store" --evict >"$root/disk.json"

bench() {  # NAME REPEAT FLAGS...
    local name=$1 repeat=$2
    shift 2
    "$bin" bench "$root/store" --backend "$backend" --prompt-tokens "$prompt_tokens" \
        --gen-tokens "$gen_tokens" --repeat "$repeat" --json "$@" >"$root/$name.json" \
        2>"$root/$name.log"
}
regimes=${REGIMES:-resident sampled streaming ram_tier ram_mapped}
wants() { [[ " $regimes " == *" $1 "* ]]; }
if wants resident; then bench resident 2 --pool-gb max; fi
if wants sampled; then bench sampled 2 --pool-gb max --temperature 0.8 --top-p 0.95; fi
if wants streaming; then
    python3 "$here/disk_bandwidth.py" "$root/store" --evict >/dev/null
    bench streaming 2 --pool-gb "$pool"
fi
cat "$root/store/experts.bin" >/dev/null  # into the page cache
if wants ram_tier; then bench ram_tier 2 --pool-gb "$pool" --buffered-io; fi
if wants ram_mapped; then bench ram_mapped 2 --pool-gb "$pool" --host-pool-gb mapped; fi

python3 - "$root" "$regimes" <<'PY'
import json, os, sys
root = sys.argv[1]
regimes = sys.argv[2].split()
disk = json.load(open(os.path.join(root, "disk.json")))
manifest = json.load(open(os.path.join(root, "store", "manifest.json")))
e = manifest["experts"]
print(f"store: {e['n_trunk_layers']} layers x {e['n_experts']} experts (H {e['hidden']}, I {e['intermediate']}, "
      f"Q{e['bits']} record {e['record_bytes']:,} B), experts.bin {disk['experts_bin_bytes'] / 1e9:.2f} GB")
print(f"disk (O_DIRECT on experts.bin): sequential {disk['sequential_mb_per_s']:.0f} MB/s, "
      f"random records {disk['random_record_mb_per_s']:.0f} MB/s")
head = ("regime", "run", "prefill tok/s", "decode tok/s", "device hit rate", "decode MB read/tok",
        "decode read MB/s", "disk-bound tok/s", "decode / disk-bound", "GPU stage coverage")
print("| " + " | ".join(head) + " |")
print("|" + "|".join("---" for _ in head) + "|")
for name in regimes:
    report = json.load(open(os.path.join(root, name + ".json")))
    device = report["memory"].get("device") or {}
    hit = device.get("device_expert_hit_rate", float("nan"))
    # Decode and MTP calls' GPU timeline covered by queued work (the rest: handoff gaps), over the
    # regime's runs; "-" from a binary without GPU stage timing.
    stage = (report.get("phases") or {}).get("gpu_stage_fraction")
    coverage = f"{stage:.3f}" if stage is not None else "-"
    for i, run in enumerate(report["runs"]):
        mb = run["decode_expert_bytes_per_token"] / 1e6
        tps = run["decode_tokens_per_second"]
        bound = disk["random_record_mb_per_s"] / mb if mb > 0 else float("inf")
        print(f"| {name} | {i + 1} | {run['prefill_tokens_per_second']:.1f} | {tps:.2f} | {hit:.3f} | "
              f"{mb:.1f} | {mb * tps:.0f} | {bound:.1f} | {tps / bound if mb > 0 else float('nan'):.2f} | "
              f"{coverage} |")
    print(f"  {name}: {report['expert_pool']}")
print("device hit rate is cumulative over the regime's runs; disk-bound tok/s = random-record disk MB/s / "
      "decode MB read per token")
PY
gemv_bench=""
for candidate in "$(dirname "$bin")/gemv_cuda_bench" "$(dirname "$bin")/bench/gemv_cuda_bench"; do
    if [[ -x $candidate ]]; then gemv_bench=$candidate; break; fi
done
if [[ -n $gemv_bench && $backend == cuda ]]; then
    echo "expert GEMV, 48 layers x 10 experts per token (us per token, GB/s, % of the HBM read rate):"
    "$gemv_bench" --experts | grep -E "read-only|^experts .* Q4 " || true
fi

