"""bench/peers/peer_table.py: the side-by-side tables of bench/peers/llama_cpp.sh (GPU) and
llama_cpp_cpu.sh (--cpu) from llama-bench and `cherenkov bench` JSON: each regime's figures, the
ratio best against best, the memory-limited rows when a limit was made and the reason when not."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TABLE = REPO / "bench" / "peers" / "peer_table.py"


def llama(model, prompt, gen, ts, **extra):
    """One llama-bench JSON entry: avg_ts and its samples."""
    entry = {"model_filename": f"/w/L4/{model}.gguf", "n_prompt": prompt, "n_gen": gen,
             "avg_ts": ts, "samples_ts": [ts * 0.98, ts, ts * 0.99]}
    entry.update(extra)
    return entry


def ours(prefill, decode, **run):
    return {"best_prefill_tokens_per_second": prefill, "best_decode_tokens_per_second": decode,
            "runs": [dict({"prefill_tokens_per_second": prefill, "decode_tokens_per_second": decode}, **run)]}


def write(directory, name, value):
    (directory / name).write_text(json.dumps(value) if not isinstance(value, str) else value)


def rows(text):
    """{regime: [cells]} of the markdown table."""
    out = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| regime") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[cells[0]] = cells[1:]
    return out


def run_table(*args):
    done = subprocess.run([sys.executable, str(TABLE), *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def gpu_results(tmp_path):
    out = tmp_path / "results"
    res = out / "L4"
    res.mkdir(parents=True)
    write(out, "limits.json", {"hbm_copy_gbps": 3000.0})
    write(res, "llama_resident.json", [llama("q4_0", 512, 0, 20000.0), llama("q4_0", 0, 128, 700.0),
                                       llama("q4_k_m", 512, 0, 18000.0), llama("q4_k_m", 0, 128, 650.0)])
    write(res, "llama_host.json", [llama("q4_0", 512, 0, 800.0, n_cpu_moe=3), llama("q4_0", 0, 128, 300.0, n_cpu_moe=3),
                                   llama("q4_0", 512, 0, 1400.0, n_cpu_moe=2), llama("q4_0", 0, 128, 400.0, n_cpu_moe=2)])
    write(res, "llama_host_all.json", [llama("q4_0", 512, 0, 1000.0), llama("q4_0", 0, 128, 250.0)])
    write(res, "cherenkov_resident.json", ours(16000.0, 1500.0))
    write(res, "cherenkov_resident_q512.json", ours(22000.0, 1550.0))
    write(res, "cherenkov_host25.json", ours(2100.0, 420.0))
    write(res, "cherenkov_host50.json", ours(2300.0, 560.0))
    disk25 = ours(90.0, 21.5, decode_expert_bytes_per_token=88e6, prefill_chunks=2,
                  prefill_expert_bytes_per_token=20e6)
    disk25.update(prompt_tokens=512, prefill_chunk_tokens=256)
    write(res, "cherenkov_disk25.json", disk25)
    write(res, "disk.json", {"sequential_mb_per_s": 1300.0, "random_record_mb_per_s": 1500.0,
                             "experts_bin_bytes": 5.12e9})
    return out, res


def test_gpu_table_gives_each_regime_best_against_best(tmp_path):
    out, res = gpu_results(tmp_path)
    table = rows(run_table(out, 4, tmp_path / "no-store"))
    assert table["resident prefill"][2] == f"{22000 / 20000:.2f}x"  # our best over theirs
    assert table["resident decode"][2] == f"{1550 / 700:.2f}x"
    assert "resident prefill, 4,096" not in table  # not run: no row


def test_gpu_table_has_the_long_resident_prefill_when_run(tmp_path):
    out, res = gpu_results(tmp_path)
    write(res, "llama_resident_long.json", [llama("q4_0", 4096, 0, 15000.0),
                                            llama("q4_k_m", 4096, 0, 14000.0)])
    write(res, "cherenkov_resident_long.json", ours(21000.0, 1400.0))
    table = rows(run_table(out, 4, tmp_path / "no-store"))
    long = table["resident prefill, 4,096"]
    assert long[0] == "21,000"
    assert "15,000 (Q4_0), 14,000 (Q4_K_M)" == long[1]
    assert long[2] == f"{21000 / 15000:.2f}x"
    assert "(--n-cpu-moe 3)" in table["experts in host RAM, 25% on GPU, decode"][1]
    assert table["experts in host RAM, 25% on GPU, decode"][2] == f"{420 / 300:.2f}x"
    assert table["experts in host RAM, 50% on GPU, prefill"][2] == f"{2300 / 1400:.2f}x"
    assert table["disk streaming, 25% pool, decode"][0].startswith("21.5 (88 MB/token = 1.89 GB/s)")
    # 512 tokens · 20 MB = 10.24 GB in 2 chunks of a 5.12 GB table: each chunk read it once;
    # at 1.5 GB/s those reads allow 75 tok/s, one read for the prompt 150.
    prefill = table["disk streaming, 25% pool, prefill"]
    assert prefill[0] == "90.0 (2 chunk(s) of 256, each reading 1.00x the 5.12 GB table)"
    assert prefill[2] == "disk bound for those reads: 75.0 tok/s at 1.50 GB/s (one table read for the whole prompt: 150.0)"
    assert not any(k.startswith("experts on disk") for k in table)  # no limit, no reason: not run
    assert not any(k.startswith("disk streaming, 25% pool, prefill of") for k in table)

    # A prompt shorter than the (automatic) chunk is one chunk of the prompt's length.
    short = ours(180.0, 23.0, prefill_chunks=1, prefill_expert_bytes_per_token=10e6)
    short.update(prompt_tokens=512, prefill_chunk_tokens=4096)
    saved = (res / "cherenkov_disk25.json").read_text()
    write(res, "cherenkov_disk25.json", short)
    assert rows(run_table(out, 4, tmp_path / "no-store"))["disk streaming, 25% pool, prefill"][0] \
        .startswith("180.0 (1 chunk(s) of 512,")
    write(res, "cherenkov_disk25.json", saved)
    assert "--cpu-experts off" not in table["experts in host RAM, 25% on GPU, decode"][0]

    # The run with every miss copied (--cpu-experts off) beside the default; the ratio stays the
    # default's.
    write(res, "cherenkov_host25_copy.json", ours(2050.0, 400.0))
    decode = rows(run_table(out, 4, tmp_path / "no-store"))["experts in host RAM, 25% on GPU, decode"]
    assert decode[0] == "420; 400 (--cpu-experts off)"
    assert decode[2] == f"{420 / 300:.2f}x"

    # With float activations for the CPU's share: its figure and ratio beside the default's.
    write(res, "cherenkov_host25_f32.json", ours(2060.0, 410.0))
    decode = rows(run_table(out, 4, tmp_path / "no-store"))["experts in host RAM, 25% on GPU, decode"]
    assert decode[0] == "420; 410 (--cpu-activations f32); 400 (--cpu-experts off)"
    assert decode[2] == f"{420 / 300:.2f}x ({410 / 300:.2f}x f32)"

    # A 4,096-token prompt in one grown chunk: 4096 · 1.25 MB = 5.12 GB, one read of the table.
    long = ours(1400.0, 26.0, prefill_chunks=1, prefill_expert_bytes_per_token=1.25e6)
    long.update(prompt_tokens=4096, prefill_chunk_tokens=4096)
    write(res, "cherenkov_disk25_long.json", long)
    prefill = rows(run_table(out, 4, tmp_path / "no-store"))["disk streaming, 25% pool, prefill of 4096"]
    assert prefill[0] == "1,400.0 (1 chunk(s) of 4096, each reading 1.00x the 5.12 GB table)"
    assert prefill[2].startswith("disk bound for those reads: 1,200.0 tok/s at 1.50 GB/s")


def test_gpu_table_has_the_memory_limited_rows_or_says_why_not(tmp_path):
    out, res = gpu_results(tmp_path)
    write(res, "stream_skipped.txt", "no memory controller\n")
    table = rows(run_table(out, 4, tmp_path / "no-store"))
    assert "no memory limit here: no memory controller" in table["experts on disk, memory-limited"][2]

    (res / "stream_skipped.txt").unlink()
    write(res, "stream_limit.json", {"limit_bytes": 3 * 2**30})
    write(res, "llama_stream.json", [llama("q4_0", 512, 0, 40.0, repack=False), llama("q4_0", 0, 32, 2.0, repack=False)])
    write(res, "cherenkov_stream.json", ours(80.0, 20.0))
    table = rows(run_table(out, 4, tmp_path / "no-store"))
    assert table["experts on disk, 3.00 GiB memory limit, prefill"][2] == f"{80 / 40:.2f}x"
    decode = table["experts on disk, 3.00 GiB memory limit, decode"]
    assert decode[0] == "20.0" and decode[1].startswith("2.0 (Q4_0 mapped") and decode[2] == "10.00x"


def test_cpu_table_compares_in_ram_and_streamed(tmp_path):
    out = tmp_path / "results"
    res = out / "E8-L2"
    res.mkdir(parents=True)
    write(out, "limits.json", {"ram_copy_gbps": 20.0})
    write(out, "machine.txt", "cpu: Test CPU\ncpus: 2\nmemory: 8 GiB\n")
    write(res, "llama_ram.json", [llama("q4_0", 128, 0, 100.0, repack=True), llama("q4_0", 0, 32, 20.0, repack=True)])
    write(res, "cherenkov_ram.json", ours(60.0, 12.0))
    write(res, "cherenkov_mapped.json", ours(55.0, 11.0))
    write(res, "stream_limit.json", {"limit_bytes": 2**30})
    write(res, "llama_stream.json", [llama("q4_0", 128, 0, 30.0, repack=False), llama("q4_0", 0, 32, 1.0, repack=False)])
    write(res, "cherenkov_stream.json", ours(50.0, 9.0))
    text = run_table("--cpu", out, "E8-L2", tmp_path / "no-store")
    assert "Test CPU, 2 cores, 8 GiB" in text
    table = rows(text)
    assert table["in RAM, prefill"][2] == f"{60 / 100:.2f}x"
    assert table["streamed, 1.00 GiB limit, decode"][2] == f"{9 / 1:.2f}x"


def test_cpu_table_adds_int8_activations_beside_float(tmp_path):
    out = tmp_path / "results"
    res = out / "E8-L2"
    res.mkdir(parents=True)
    write(out, "machine.txt", "cpu: Test CPU\ncpus: 2\nmemory: 8 GiB\n")
    write(res, "llama_ram.json", [llama("q4_0", 128, 0, 100.0, repack=True), llama("q4_0", 0, 32, 20.0, repack=True)])
    write(res, "cherenkov_ram.json", ours(60.0, 12.0))
    write(res, "cherenkov_mapped.json", ours(55.0, 11.0))
    write(res, "cherenkov_ram_q8.json", ours(90.0, 25.0))
    write(res, "stream_limit.json", {"limit_bytes": 2**30})
    write(res, "llama_stream.json", [llama("q4_0", 128, 0, 30.0, repack=False), llama("q4_0", 0, 32, 1.0, repack=False)])
    write(res, "cherenkov_stream.json", ours(50.0, 9.0))
    write(res, "cherenkov_stream_q8.json", ours(70.0, 14.0))
    table = rows(run_table("--cpu", out, "E8-L2", tmp_path / "no-store"))
    decode = table["in RAM, decode"]
    assert "25.0 (`--cpu-activations q8`, cache)" in decode[0]
    assert decode[2] == f"{12 / 20:.2f}x (f32); {25 / 20:.2f}x (q8)"
    streamed = table["streamed, 1.00 GiB limit, prefill"]
    assert streamed[0] == "50.0 (f32); 70.0 (q8)"
    assert streamed[2] == f"{50 / 30:.2f}x (f32); {70 / 30:.2f}x (q8)"
