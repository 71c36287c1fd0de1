#!/usr/bin/env python3
"""The side-by-side table of bench/peers/llama_cpp.sh: both engines' figures per regime, the
ratio Cherenkov / llama.cpp (best against best), decode bytes per token and the share of the
HBM roofline (bytes a decode token must read / the device-to-device copy rate measured in the
same run), disk streaming against the disk's O_DIRECT rates, and both engines with the experts
on disk under one memory limit.

    bench/peers/peer_table.py RESULTS_DIR LAYERS STORE_DIR   (reads RESULTS_DIR/L<LAYERS>/*.json)

With --cpu, the table of bench/peers/llama_cpp_cpu.sh: both engines on the CPU with everything in
RAM and with the experts streamed from disk under a memory limit, the load average before and
after each regime, decode bytes per token against the RAM copy rate measured in the same run, and
the machine (RESULTS_DIR/machine.txt).

    bench/peers/peer_table.py --cpu RESULTS_DIR TAG STORE_DIR   (reads RESULTS_DIR/TAG/*.json)
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def llama_rates(entries, best=False, **match):
    """{(quant, 'pp'|'tg'): [tok/s...]} of llama-bench JSON entries matching `match`: each entry's
    average over its repeats, or with `best` its fastest repeat (as Cherenkov's best_* figures)."""
    out = {}
    for e in entries or []:
        if any(e.get(k) != v for k, v in match.items()):
            continue
        quant = "Q4_K_M" if "q4_k_m" in e["model_filename"] else "Q4_0"
        if e.get("repack") is False:  # CPU: weights used where they were mapped, not repacked
            quant += " --repack 0"
        kind = "pp" if e["n_prompt"] > 0 else "tg"
        out.setdefault((quant, kind), []).append(max(e["samples_ts"]) if best else e["avg_ts"])
    return out


def span(values):
    values = [v for v in values if v]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    digits = 1 if hi < 100 else 0  # CPU and disk rates are small numbers
    if round(lo, digits) == round(hi, digits):
        return f"{lo:,.{digits}f}"
    return f"{lo:,.{digits}f}-{hi:,.{digits}f}"


def ratio(ours, theirs):
    ours = [v for v in ours if v]
    theirs = [v for v in theirs if v]
    return f"{max(ours) / max(theirs):.2f}x" if ours and theirs else "-"


def cherenkov(res, name, key):
    report = load(os.path.join(res, f"cherenkov_{name}.json"))
    return [report[key]] if report else []


def decode_bytes_per_token(store_dir):
    manifest = load(os.path.join(store_dir, "manifest.json"))
    config = load(os.path.join(store_dir, "config.json"))
    if not manifest or not config:
        return None
    text = config.get("text_config", config)
    dense = 0
    for entry in manifest["dense"]:
        if entry["name"].endswith("embed_tokens.weight"):
            continue  # one row a token
        for part in ("data", "scales", "biases"):
            if part in entry:
                dense += entry[part][1]
    experts = manifest["experts"]
    routed = text["num_experts_per_tok"] * experts["n_trunk_layers"] * experts["record_bytes"]
    return dense + routed


def prefill_read(stream, disk):
    """(bytes of experts a streamed prefill read, its chunks, the table's bytes) or None."""
    run = stream["runs"][0]
    per_token, chunks = run.get("prefill_expert_bytes_per_token"), run.get("prefill_chunks")
    table = disk.get("experts_bin_bytes")
    if not per_token or not chunks or not table:
        return None
    return per_token * stream.get("prompt_tokens", 0), chunks, table


def prefill_streaming(stream, disk):
    """A streamed prefill's rate, with how many times each chunk read the expert table."""
    rate = f"{stream['best_prefill_tokens_per_second']:,.1f}"
    read = prefill_read(stream, disk)
    if not read:
        return rate
    total, chunks, table = read
    # The chunk's capacity, or the whole prompt when that is shorter (an automatic quantum).
    chunk = stream.get("prefill_chunk_tokens", "?")
    prompt = stream.get("prompt_tokens")
    if isinstance(chunk, int) and isinstance(prompt, int):
        chunk = min(chunk, prompt)
    return (f"{rate} ({chunks} chunk(s) of {chunk}, "
            f"each reading {total / chunks / table:.2f}x the {table / 1e9:.2f} GB table)")


def prefill_disk_bound(stream, disk):
    """The rate the disk allows for what the prefill read, at the O_DIRECT random-record rate."""
    read = prefill_read(stream, disk)
    rate = disk.get("random_record_mb_per_s")
    if not read or not rate or not stream.get("prompt_tokens"):
        return "-"
    seconds = read[0] / (rate * 1e6)
    return (f"disk bound for those reads: {stream['prompt_tokens'] / seconds:,.1f} tok/s at "
            f"{rate / 1e3:.2f} GB/s (one table read for the whole prompt: "
            f"{stream['prompt_tokens'] / (read[2] / (rate * 1e6)):,.1f})")


def load_averages(res):
    """{regime: 'before -> after' 1-minute load averages} from load.txt (the last entry wins)."""
    loads = {}
    try:
        with open(os.path.join(res, "load.txt")) as f:
            for line in f:
                words = line.split()
                if len(words) == 9 and words[1] == "before" and words[5] == "after":
                    loads[words[0]] = f"{words[2]} -> {words[6]}"
    except OSError:
        pass
    return loads


def cpu_main(out_dir, tag, store_dir):
    res = os.path.join(out_dir, tag)
    limits = load(os.path.join(out_dir, "limits.json")) or {}
    loads = load_averages(res)
    ram = llama_rates(load(os.path.join(res, "llama_ram.json")), best=True)
    stream = llama_rates(load(os.path.join(res, "llama_stream.json")), best=True)
    memory = {name: load(os.path.join(res, f"{name}_mem.json")) or {}
              for name in ("llama_stream", "cherenkov_stream", "cherenkov_stream_q8")}
    limit = (load(os.path.join(res, "stream_limit.json")) or {}).get("limit_bytes")

    def ours(name, key):
        return cherenkov(res, name, key)

    def load_cell(*regimes):
        names = {"cherenkov_ram": "Cherenkov cache", "cherenkov_mapped": "Cherenkov mapped",
                 "cherenkov_ram_q8": "Cherenkov q8", "llama_ram": "llama.cpp",
                 "cherenkov_stream": "Cherenkov", "cherenkov_stream_q8": "Cherenkov q8",
                 "llama_stream": "llama.cpp"}
        return "; ".join(f"{names[r]} {loads[r]}" for r in regimes if r in loads) or "-"

    rows = []
    for kind, key, label in (("pp", "best_prefill_tokens_per_second", "prefill"),
                             ("tg", "best_decode_tokens_per_second", "decode")):
        pool, mapped, q8 = ours("ram", key), ours("mapped", key), ours("ram_q8", key)
        quants = ("Q4_0", "Q4_K_M", "Q4_0 --repack 0", "Q4_K_M --repack 0")
        theirs = [(q, ram.get((q, kind), [])) for q in quants]
        all_theirs = [x for _, v in theirs for x in v]
        ours_text = f"{span(pool)} (cache of every expert); {span(mapped)} (mapped)"
        ratio_text = ratio(pool + mapped, all_theirs)
        if q8:
            ours_text += f"; {span(q8)} (`--cpu-activations q8`, cache)"
            ratio_text = f"{ratio_text} (f32); {ratio(q8, all_theirs)} (q8)"
        rows.append((f"in RAM, {label}", ours_text,
                     ", ".join(f"{span(v)} ({q})" for q, v in theirs if v), ratio_text,
                     load_cell("cherenkov_ram", "cherenkov_mapped", "cherenkov_ram_q8", "llama_ram")))
    if limit:
        for kind, key, label in (("pp", "best_prefill_tokens_per_second", "prefill"),
                                 ("tg", "best_decode_tokens_per_second", "decode")):
            theirs = stream.get(("Q4_0 --repack 0", kind), [])
            f32, q8 = ours("stream", key), ours("stream_q8", key)
            ours_text, ratio_text = span(f32), ratio(f32, theirs)
            if q8:
                ours_text += f" (f32); {span(q8)} (q8)"
                ratio_text = f"{ratio_text} (f32); {ratio(q8, theirs)} (q8)"
            rows.append((f"streamed, {limit / 2**30:.2f} GiB limit, {label}", ours_text,
                         f"{span(theirs)} (Q4_0 --repack 0, mapped)", ratio_text,
                         load_cell("cherenkov_stream", "cherenkov_stream_q8", "llama_stream")))
    elif os.path.exists(os.path.join(res, "stream_skipped.txt")):
        with open(os.path.join(res, "stream_skipped.txt")) as f:
            rows.append(("streamed", "not run", "not run", f"no memory limit here: {f.read().strip()}", "-"))

    try:
        with open(os.path.join(out_dir, "machine.txt")) as f:
            facts = dict(line.rstrip("\n").split(": ", 1) for line in f if ": " in line)
    except OSError:
        facts = {}
    print(f"### CPU, {tag} ({facts.get('cpu', '?')}, {facts.get('cpus', '?')} cores, {facts.get('memory', '?')})\n")
    print("| regime | Cherenkov tok/s | llama.cpp tok/s | ratio | load average before -> after |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    per_token = decode_bytes_per_token(store_dir)
    copy = limits.get("ram_copy_gbps")
    if per_token and copy:
        roof = copy * 1e9 / per_token
        best = {"Cherenkov": ours("ram", "best_decode_tokens_per_second") + ours("mapped", "best_decode_tokens_per_second")
                + ours("ram_q8", "best_decode_tokens_per_second"),
                "llama.cpp": [x for (_, kind), v in ram.items() if kind == "tg" for x in v]}
        shares = ", ".join(f"{name} {100 * max(v) / roof:.0f}%" for name, v in best.items() if v)
        print(f"\nA decode token reads {per_token / 1e6:.1f} MB (dense weights without the embedding, plus "
              f"top-k experts in every layer); at the measured RAM copy rate of {copy:.1f} GB/s (read + "
              f"write) the bound is {roof:.1f} tok/s; best in-RAM decode: {shares} of it.")
    for name in ("llama_stream", "cherenkov_stream", "cherenkov_stream_q8"):
        m = memory[name]
        if m:
            print(f"{name}: peak {m.get('peak_usage_bytes', 0) / 2**30:.2f} GiB in the cgroup "
                  f"({m.get('peak_anon_bytes', 0) / 2**30:.2f} GiB anonymous), {m.get('limit_hits', 0)} limit hits, "
                  f"exit status {m.get('exit_status')}.")
    disk = load(os.path.join(res, "disk.json"))
    run = (load(os.path.join(res, "cherenkov_stream.json")) or {}).get("runs", [{}])[0]
    if disk:
        print(f"Disk (O_DIRECT, one reader): {disk.get('sequential_mb_per_s', 0) / 1e3:.2f} GB/s sequential, "
              f"{disk.get('random_record_mb_per_s', 0) / 1e3:.2f} GB/s random records"
              + (f"; Cherenkov's streamed decode read {run['decode_expert_bytes_per_token'] / 1e6:.0f} MB of "
                 "experts a token." if run.get("decode_expert_bytes_per_token") else "."))


def main():
    if sys.argv[1] == "--cpu":
        cpu_main(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    out_dir, layers = sys.argv[1], int(sys.argv[2])
    res = os.path.join(out_dir, f"L{layers}")
    limits = load(os.path.join(out_dir, "limits.json")) or {}
    resident = load(os.path.join(res, "llama_resident.json"))
    host = load(os.path.join(res, "llama_host.json"))
    host_all = load(os.path.join(res, "llama_host_all.json"))
    quarter, half = layers * 3 // 4, layers // 2
    rows = []

    r = llama_rates(resident)
    for kind, key, label in (("pp", "best_prefill_tokens_per_second", "resident prefill"),
                             ("tg", "best_decode_tokens_per_second", "resident decode")):
        ours = cherenkov(res, "resident", key) + cherenkov(res, "resident_q512", key)
        q40, q4k = r.get(("Q4_0", kind), []), r.get(("Q4_K_M", kind), [])
        rows.append((label, span(ours), f"{span(q40)} (Q4_0), {span(q4k)} (Q4_K_M)", ratio(ours, q40 + q4k)))
        if kind == "pp":
            long = llama_rates(load(os.path.join(res, "llama_resident_long.json")))
            ours = cherenkov(res, "resident_long", key)
            q40, q4k = long.get(("Q4_0", kind), []), long.get(("Q4_K_M", kind), [])
            if ours or q40 or q4k:
                rows.append(("resident prefill, 4,096", span(ours),
                             f"{span(q40)} (Q4_0), {span(q4k)} (Q4_K_M)", ratio(ours, q40 + q4k)))
    for share, ncmoe, name in ((25, quarter, "host25"), (50, half, "host50")):
        h = llama_rates(host, n_cpu_moe=ncmoe)
        for kind, key, label in (("pp", "best_prefill_tokens_per_second", "prefill"),
                                 ("tg", "best_decode_tokens_per_second", "decode")):
            ours = cherenkov(res, name, key)
            # Cherenkov's default computes some decode misses on the CPU (--cpu-experts auto) with
            # int8 activations (as llama.cpp's CPU experts take them); beside it the same in
            # float, and every miss copied to the device.
            f32 = cherenkov(res, f"{name}_f32", key)
            copied = cherenkov(res, f"{name}_copy", key)
            ours_text = span(ours) + (f"; {span(f32)} (--cpu-activations f32)" if f32 else "") + \
                (f"; {span(copied)} (--cpu-experts off)" if copied else "")
            theirs = h.get(("Q4_0", kind), [])
            extra = []
            if share == 25:  # all experts on the CPU: less GPU memory than ours, shown beside
                extra = llama_rates(host_all).get(("Q4_0", kind), [])
            theirs_text = f"{span(theirs)} (--n-cpu-moe {ncmoe})"
            if extra:
                theirs_text += f"; {span(extra)} (-ot exps=CPU)"
            ratio_text = ratio(ours, theirs + extra)
            if f32 and ratio_text != "-":
                ratio_text += f" ({ratio(f32, theirs + extra)} f32)"
            rows.append((f"experts in host RAM, {share}% on GPU, {label}", ours_text, theirs_text,
                         ratio_text))
    disk = load(os.path.join(res, "disk.json")) or {}
    stream = load(os.path.join(res, "cherenkov_disk25.json"))
    if stream:
        run = stream["runs"][0]
        mb = run.get("decode_expert_bytes_per_token", 0) / 1e6
        rate = stream["best_decode_tokens_per_second"]
        rows.append(("disk streaming, 25% pool, decode", f"{rate:,.1f} ({mb:.0f} MB/token = {rate * mb / 1e3:.2f} GB/s)",
                     "(not run)", f"disk: {disk.get('sequential_mb_per_s', 0) / 1e3:.2f} GB/s sequential, "
                     f"{disk.get('random_record_mb_per_s', 0) / 1e3:.2f} GB/s random records"))
        rows.append(("disk streaming, 25% pool, prefill", prefill_streaming(stream, disk), "(not run)",
                     prefill_disk_bound(stream, disk)))
    long = load(os.path.join(res, "cherenkov_disk25_long.json"))
    if long:
        rows.append((f"disk streaming, 25% pool, prefill of {long.get('prompt_tokens', '?')}",
                     prefill_streaming(long, disk), "(not run)", prefill_disk_bound(long, disk)))
    # Both engines with the experts on disk under one memory limit (llama.cpp from mmap).
    limit = (load(os.path.join(res, "stream_limit.json")) or {}).get("limit_bytes")
    limited = llama_rates(load(os.path.join(res, "llama_stream.json")), best=True)
    if limit:
        for kind, key, label in (("pp", "best_prefill_tokens_per_second", "prefill"),
                                 ("tg", "best_decode_tokens_per_second", "decode")):
            ours = cherenkov(res, "stream", key)
            theirs = limited.get(("Q4_0 --repack 0", kind), [])
            rows.append((f"experts on disk, {limit / 2**30:.2f} GiB memory limit, {label}", span(ours),
                         f"{span(theirs)} (Q4_0 mapped, -ot exps=CPU)", ratio(ours, theirs)))
    elif os.path.exists(os.path.join(res, "stream_skipped.txt")):
        with open(os.path.join(res, "stream_skipped.txt")) as f:
            rows.append(("experts on disk, memory-limited", "not run", "not run",
                         f"no memory limit here: {f.read().strip()}"))

    print(f"### {layers} layers\n")
    print("| regime | Cherenkov tok/s | llama.cpp tok/s | ratio |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    per_token = decode_bytes_per_token(sys.argv[3])
    hbm = limits.get("hbm_copy_gbps")
    ours = cherenkov(res, "resident", "best_decode_tokens_per_second")
    if per_token and hbm and ours:
        roof = hbm * 1e9 / per_token
        print(f"\nResident decode reads {per_token / 1e6:.1f} MB a token (dense weights without the embedding, "
              f"plus top-k experts in every layer); at the measured HBM copy rate of {hbm:,.0f} GB/s the "
              f"roofline is {roof:,.0f} tok/s, and Cherenkov's best decode is {100 * max(ours) / roof:.0f}% of it.")


if __name__ == "__main__":
    main()
