#!/usr/bin/env bash
# Packs a synthetic checkpoint (bench/pack_synthetic.py) and reports source MB/s and peak RSS.
#   bench/pack_bench.sh [WORK_DIR] [LAYERS] [EXPERTS]      (defaults: /tmp/cherenkov-pack-bench 8 48)
# Needs CHERENKOV_BIN (default build/cherenkov). The page cache is not dropped: the source is
# read once, sequentially, so the first run measures the disk and later runs the CPU.
set -euo pipefail
work=${1:-/tmp/cherenkov-pack-bench}
layers=${2:-8}
experts=${3:-48}
bin=${CHERENKOV_BIN:-build/cherenkov}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
if [[ ! -f "$work/source/model.safetensors" ]]; then
    python3 "$here/pack_synthetic.py" "$work/source" --layers "$layers" --experts "$experts"
fi
rm -rf "$work/store"
source_bytes=$(stat -c %s "$work/source/model.safetensors")
start=$(date +%s.%N)
/usr/bin/time -f '%M' -o "$work/rss_kib" "$bin" prepare "$work/source" --output "$work/store" >/dev/null 2>"$work/progress.log"
end=$(date +%s.%N)
rss_kib=$(tail -1 "$work/rss_kib")
store_bytes=$(du -sb "$work/store" | cut -f1)
python3 - "$source_bytes" "$store_bytes" "$start" "$end" "$rss_kib" "$(nproc)" <<'PY'
import sys
source, store, start, end, rss, cores = sys.argv[1:]
seconds = float(end) - float(start)
print(f"source {int(source) / 1e9:.2f} GB -> store {int(store) / 1e9:.2f} GB in {seconds:.1f} s: "
      f"{int(source) / 1e6 / seconds:.1f} MB/s (source), peak RSS {int(rss) / 1024:.0f} MiB, {cores} cores")
PY
