# shellcheck shell=bash disable=SC2154  # repo, work, out, binary, until_step: set by the caller
# Steps shared by the peer benchmarks (bench/peers/llama_cpp.sh on a GPU machine,
# bench/peers/llama_cpp_cpu.sh on the CPU): sourced, not run. The caller sets `repo`, `work`,
# `out`, `binary` and `until_step` first; the functions below read them.

peer_log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

peer_timed() {  # peer_timed NAME CMD...: runs CMD, appends "NAME seconds" to $out/steps.txt
    local name=$1 start end
    shift
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    echo "$name $(python3 -c "print(f'{$end - $start:.1f}')")" | tee -a "$out/steps.txt" >&2
}

# peer_result OUT LOG CMD...: runs CMD with its output to OUT and its errors to LOG; OUT appears
# only when CMD succeeded (written as OUT.partial and renamed), so a run cut by a time limit never
# leaves half a result that the next run would take as done. Returns CMD's status.
peer_result() {
    local result=$1 log=$2 status=0
    shift 2
    "$@" >"$result.partial" 2>"$log" || status=$?
    if ((status == 0)); then
        mv "$result.partial" "$result"
    else
        rm -f "$result.partial"
    fi
    return "$status"
}

# peer_llama_cpp CUDA_FLAGS...: unpacks llama.cpp's source from .peers/ into $work/llama.cpp,
# patches its converter and sets `llama` to that directory; then starts building llama-bench and
# llama-quantize there with the given GGML flags in the background (skipped when built), its log
# in $out/llama_build.log. The build is CPU work that the weights' first steps (the checkpoint,
# `cherenkov prepare`, the converter, which needs only the source) can run beside: on a 16-core
# GPU machine the build and those steps take about as long (docs/benchmarks.md has a run's
# times). peer_wait_build waits for it; a script that exits first stops it (peer_stop_build, on
# EXIT).
peer_llama_cpp() {
    llama="$work/llama.cpp"
    peer_build_pid=""
    if [[ ! -x "$llama/build/bin/llama-bench" || ! -x "$llama/build/bin/llama-quantize" ]]; then
        local tarball generator
        tarball=$(find "$repo/.peers" -maxdepth 1 -name 'llama.cpp-*.tar.xz' 2>/dev/null | sort | tail -1)
        [[ -n "$tarball" ]] || { echo "no .peers/llama.cpp-*.tar.xz: run bench/peers/fetch_llama_cpp.sh" >&2; exit 1; }
        rm -rf "$llama"
        tar xJf "$tarball" -C "$work"
        generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
        peer_timed build_llama_cpp bash -c "cmake -S '$llama' -B '$llama/build' -G '$generator' \
            -DCMAKE_BUILD_TYPE=Release $* -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF && \
            cmake --build '$llama/build' -j '$(nproc)' --target llama-bench llama-quantize" \
            >"$out/llama_build.log" 2>&1 &
        peer_build_pid=$!
        trap peer_stop_build EXIT
    fi
    # llama.cpp's converter gives a layer its QSA compress ratio only where layer_types says
    # "full_attention", but transformers' config class renames that entry (qwen_sparse_attention
    # in 5.17, indexed_attention in 5.23), and the GGUF then silently runs QSA as dense attention.
    # Accept every spelling (the GGUF's attention.compress_ratios is checked after conversion).
    sed -i 's/if layer_types\[i\] == "full_attention" else 0/if layer_types[i] in ("full_attention", "qwen_sparse_attention", "indexed_attention") else 0/' \
        "$llama/conversion/qwen4exp.py"
    grep -q '"indexed_attention") else 0' "$llama/conversion/qwen4exp.py" ||
        { echo "the converter's compress-ratio line has changed; look at $llama/conversion/qwen4exp.py" >&2; exit 1; }
}

# peer_wait_build: waits for the build peer_llama_cpp started (if any); fails with its log's end.
peer_wait_build() {
    [[ -n "${peer_build_pid:-}" ]] || return 0
    local pid=$peer_build_pid
    peer_build_pid=""
    if ! wait "$pid"; then
        tail -20 "$out/llama_build.log" >&2
        echo "llama.cpp's build failed: $out/llama_build.log" >&2
        exit 1
    fi
    grep -h "^build_llama_cpp" "$out/steps.txt" >&2 || true
}

# peer_stop_build: stops a build still running (its whole process tree), so that a script cut
# short leaves no compiler behind to race the next run's fresh unpacking.
peer_stop_build() {
    [[ -n "${peer_build_pid:-}" ]] || return 0
    peer_kill_tree "$peer_build_pid"
    wait "$peer_build_pid" 2>/dev/null || true
    peer_build_pid=""
}
peer_kill_tree() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null); do peer_kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}

# peer_weights DIR RES LAYERS SYNTHETIC_FLAGS...: the same synthetic weights in both engines'
# forms, DIR/store (`cherenkov prepare`) and DIR/q4_0.gguf, DIR/q4_k_m.gguf (llama.cpp's converter
# to Q8_0, then llama-quantize), deleting the BF16 checkpoint and the Q8_0 file once used. Those
# two intermediates go to $scratch/L<layers> when `scratch` is set (a RAM disk such as /dev/shm,
# so that a 12-layer checkpoint of 63 GB need not fit on the disk beside the results), else to
# DIR. Logs go to RES. Needs `llama` (peer_llama_cpp) and `converter_python`
# (bench/peers/converter_env.sh).
peer_weights() {
    local dir=$1 res=$2 layers=$3 type lower
    shift 3
    local tmp=$dir
    [[ -n "${scratch:-}" ]] && tmp="$scratch/L$layers"
    mkdir -p "$tmp"
    local ckpt="$tmp/ckpt" q8="$tmp/q8_0.gguf"
    [[ -f "$dir/q4_0.gguf" && -f "$dir/q4_k_m.gguf" && -f "$dir/store/manifest.json" ]] && return 0
    if [[ ! -f "$ckpt/config.json" && ! -f "$q8" ]]; then
        peer_timed "L$layers write_checkpoint" python3 "$repo/bench/synthetic_store.py" "$ckpt" --bf16 \
            --layers "$layers" --vocab 248320 --tokenizer "$repo/tests/data/tokenizer-qwen2-qwen3" "$@"
    fi
    if [[ ! -f "$dir/store/manifest.json" ]]; then
        peer_timed "L$layers cherenkov_prepare" "$binary" prepare "$ckpt" --output "$dir/store" >/dev/null
    fi
    if [[ ! -f "$q8" ]]; then
        peer_timed "L$layers llama_convert" "$converter_python" "$llama/convert_hf_to_gguf.py" "$ckpt" \
            --outtype q8_0 --outfile "$q8.partial" >"$res/convert.log" 2>&1
        mv "$q8.partial" "$q8"
    fi
    rm -rf "$ckpt"
    # The QSA layer must reach llama.cpp as sparse attention (issue 34's trap).
    PYTHONPATH="$llama/gguf-py" python3 - "$q8" >"$res/compress_ratios.txt" <<'PY'
import sys, gguf
reader = gguf.GGUFReader(sys.argv[1])
field = next(f for name, f in reader.fields.items() if name.endswith("attention.compress_ratios"))
print([int(field.parts[i][0]) for i in field.data])
PY
    peer_log "L$layers compress ratios: $(cat "$res/compress_ratios.txt")"
    grep -q '[1-9]' "$res/compress_ratios.txt" ||
        { echo "the GGUF has no QSA compress ratio; it would run QSA as dense attention" >&2; exit 1; }
    [[ "$until_step" == convert ]] && { peer_wait_build; exit 0; }
    peer_wait_build
    for type in Q4_0 Q4_K_M; do
        lower=$(echo "$type" | tr '[:upper:]' '[:lower:]')
        if [[ ! -f "$dir/$lower.gguf" ]]; then
            peer_timed "L$layers llama_quantize_$type" "$llama/build/bin/llama-quantize" --allow-requantize \
                "$q8" "$dir/$lower.gguf.partial" "$type" >"$res/quantize_$lower.log" 2>&1
            mv "$dir/$lower.gguf.partial" "$dir/$lower.gguf"
        fi
    done
    rm -f "$q8"
}

# peer_stream_limit GGUF PROBE_JSON SHARE_PERCENT OUT_JSON: prints the memory limit of the
# streaming regime in bytes (and writes its parts to OUT_JSON): llama.cpp's anonymous peak from
# PROBE_JSON (bench/peers/memlimit.py --report of a short unlimited run), the GGUF's dense tensors
# but the row-gathered embedding tables (one row a token), SHARE_PERCENT % of its expert tensors,
# and 64 MiB of slack. Fails when that anonymous peak could hold half the expert tensors (no limit
# would then keep them out of RAM). Needs `llama` (peer_llama_cpp).
peer_stream_limit() {
    PYTHONPATH="$llama/gguf-py" python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys, gguf
reader = gguf.GGUFReader(sys.argv[1])
experts = sum(int(t.n_bytes) for t in reader.tensors if "_exps" in t.name)
tables = sum(int(t.n_bytes) for t in reader.tensors if "token_embd" in t.name)
dense = sum(int(t.n_bytes) for t in reader.tensors if "_exps" not in t.name) - tables
anon = json.load(open(sys.argv[2]))["peak_anon_bytes"]
if anon >= experts * 0.5:
    sys.exit(f"llama.cpp's anonymous peak ({anon} B) could hold its expert tensors: no limit keeps them out")
share = float(sys.argv[3]) / 100
slack = 64 << 20
limit = anon + dense + int(share * experts) + slack
json.dump({"limit_bytes": limit, "anon_bytes": anon, "gguf_dense_bytes": dense, "gguf_table_bytes": tables,
           "gguf_expert_bytes": experts, "share": share, "slack_bytes": slack}, open(sys.argv[4], "w"))
print(limit)
PY
}
