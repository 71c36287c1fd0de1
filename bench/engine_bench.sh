#!/usr/bin/env bash
# CPU engine benchmark on a synthetic store with realistic shapes (issue 7):
#   bench/engine_bench.sh [OUT_ROOT]                     (default /tmp/cherenkov-engine-bench)
# 1. bench/synthetic_store.py writes an MLX 4-bit qwen4_exp checkpoint: LAYERS (4: 3 GDN + 1 QSA)
#    x EXPERTS (512) experts, top-10, hidden 2560, moe_intermediate 640, FN-like otherwise (~6.3 GB);
# 2. `cherenkov prepare` packs it (MLX sources are copied byte for byte), then the source is deleted;
# 3. the disk's read bandwidth is measured on experts.bin with O_DIRECT (no page cache): 16 MiB
#    sequential blocks, and whole expert records at random (what a cold decode reads);
# 4. experts.bin is evicted from the page cache (posix_fadvise DONTNEED on that file only) and
#    `cherenkov bench --prompt-tokens 64 --gen-tokens 8 --repeat 2 --threads $(nproc) --json` runs:
#    run 1 reads its experts from disk, run 2 (same seeded prompt, same experts) from the page cache;
# 5. a table: prefill / decode tok/s, expert MB/token, the expert read rate that decode implies
#    against the disk's, peak RSS. The report is kept as OUT_ROOT/bench.json.
# The multi-GB files are deleted at the end unless KEEP=1. Environment: CHERENKOV_BIN (default
# build/cherenkov), LAYERS, EXPERTS, PROMPT_TOKENS, GEN_TOKENS, REPEAT, THREADS, KEEP.
set -euo pipefail
root=${1:-/tmp/cherenkov-engine-bench}
bin=${CHERENKOV_BIN:-build/cherenkov}
layers=${LAYERS:-4}
experts=${EXPERTS:-512}
prompt_tokens=${PROMPT_TOKENS:-64}
gen_tokens=${GEN_TOKENS:-8}
repeat=${REPEAT:-2}
threads=${THREADS:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$root"
cleanup() {
    if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$root/source" "$root/store"; fi
}
trap cleanup EXIT

"$here/make_synthetic_store.sh" "$root" "$layers" "$experts" "$bin"

# Disk read bandwidth of experts.bin, bypassing the page cache, then evict the file's cached pages.
python3 "$here/disk_bandwidth.py" "$root/store" --evict >"$root/disk.json"

"$bin" bench "$root/store" --prompt-tokens "$prompt_tokens" --gen-tokens "$gen_tokens" --repeat "$repeat" \
    --threads "$threads" --json >"$root/bench.json"

python3 - "$root/bench.json" "$root/disk.json" "$root/store/manifest.json" <<'PY'
import json, os, platform, sys
report, disk, manifest = (json.load(open(p)) for p in sys.argv[1:4])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")) / 2**20
e = manifest["experts"]
print(f"machine: {cpu}, {os.cpu_count()} CPUs, {mem:.0f} GiB RAM; {report['threads']} threads")
print(f"store: {e['n_trunk_layers']} layers x {e['n_experts']} experts (H {e['hidden']}, I {e['intermediate']}, "
      f"Q{e['bits']} record {e['record_bytes']:,} B), experts.bin {disk['experts_bin_bytes'] / 1e9:.2f} GB; "
      f"prompt {report['prompt_tokens']}, generate {report['gen_tokens']}; load {report['load_seconds']:.2f} s")
print(f"disk (O_DIRECT on experts.bin): sequential {disk['sequential_mb_per_s']:.0f} MB/s (16 MiB blocks), "
      f"random records {disk['random_record_mb_per_s']:.0f} MB/s")
rows = []
for i, run in enumerate(report["runs"]):
    label = "run 1 (experts cold)" if i == 0 else f"run {i + 1} (page cache)"
    dec_mb = run["decode_expert_bytes_per_token"] / 1e6
    rows.append((label, run["prefill_tokens_per_second"], run["decode_tokens_per_second"],
                 run["prefill_expert_bytes_per_token"] / 1e6, dec_mb, dec_mb * run["decode_tokens_per_second"],
                 disk["random_record_mb_per_s"] / dec_mb if dec_mb else float("inf")))
head = ("", "prefill tok/s", "decode tok/s", "prefill expert MB/tok", "decode expert MB/tok",
        "decode expert MB/s", "disk-bound decode tok/s")
widths = [max(len(head[0]), max(len(r[0]) for r in rows))] + [len(h) for h in head[1:]]
print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for r in rows:
    cells = [r[0].ljust(widths[0])] + [f"{v:.2f}".rjust(w) for v, w in zip(r[1:], widths[1:])]
    print("| " + " | ".join(cells) + " |")
m = report["memory"]
print(f"peak RSS {m['peak_rss_bytes'] / 1e6:.0f} MB (dense {m['dense_bytes'] / 1e6:.0f} MB, n-gram mapped "
      f"{m['ngram_mapped_bytes'] / 1e6:.0f} MB)")
print("decode expert MB/s = decode expert MB/token x decode tok/s; disk-bound decode tok/s = random-record "
      "disk MB/s / decode expert MB/token (the rate if every expert came from disk)")
PY
