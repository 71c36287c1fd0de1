#!/usr/bin/env bash
# Writes a synthetic FN-shaped MLX 4-bit checkpoint (bench/synthetic_store.py: random 4-bit codes
# written directly, no BF16 intermediate) and packs it with `cherenkov prepare` into ROOT/store,
# unless ROOT/store already holds a store. The source is deleted afterwards unless KEEP=1.
#   bench/make_synthetic_store.sh ROOT LAYERS EXPERTS CHERENKOV_BIN [synthetic_store.py flags]
set -euo pipefail
root=$1 layers=$2 experts=$3 bin=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
[[ -f "$root/store/manifest.json" ]] && exit 0
rm -rf "$root/source" "$root/store"
mkdir -p "$root"
python3 "$here/synthetic_store.py" "$root/source" --layers "$layers" --experts "$experts" \
    --top-k 10 --hidden 2560 --intermediate 640 --vocab 32768 "$@"
start=$(date +%s.%N)
if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f '%M' -o "$root/prepare_rss_kib" "$bin" prepare "$root/source" \
        --output "$root/store" >/dev/null 2>"$root/prepare.log"
else
    "$bin" prepare "$root/source" --output "$root/store" >/dev/null 2>"$root/prepare.log"
    echo 0 >"$root/prepare_rss_kib"
fi
end=$(date +%s.%N)
python3 -c "import sys; print(f'packed in {float(sys.argv[2]) - float(sys.argv[1]):.1f} s, peak RSS {int(sys.argv[3]) / 1024:.0f} MiB')" \
    "$start" "$end" "$(tail -1 "$root/prepare_rss_kib")"
[[ "${KEEP:-0}" == 1 ]] || rm -rf "$root/source"
