"""The model-running commands end to end on packed fixture stores: generation (streamed text,
timings and memory_stats on stderr), greedy output identical for every draft count, `logits`
against the transformers reference, `perplexity`, `bench`, and clear errors for bad input."""
import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="module")
def stores(run_cli, tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    out = {}
    for name, checkpoint in [("a", "tiny_a/hf_flat_fused"), ("c", "tiny_c/mlx_q4")]:
        run_cli("prepare", FIXTURES / checkpoint, "--output", root / name, "--experts", "4,2")
        out[name] = root / name
    return out


def test_generation_streams_text_and_reports_timings(run_cli, stores):
    result = run_cli(stores["a"], "Hello there", "--max-tokens", "12", "--no-eos")
    assert result.stdout.strip()
    err = result.stderr
    assert "load:" in err and "prefill:" in err and "decode: 11 tokens" in err
    stats_line = next(line for line in err.splitlines() if line.startswith("memory_stats "))
    stats = json.loads(stats_line[len("memory_stats "):])
    assert stats["peak_rss_bytes"] > 0 and stats["dense_bytes"] > 0 and stats["experts_read_bytes"] > 0


def test_greedy_text_is_the_same_for_every_draft_count(run_cli, stores):
    texts = []
    for drafts in ("0", "1", "2"):
        result = run_cli(stores["a"], "def add(a, b):", "--raw", "--max-tokens", "40", "--no-eos", "--drafts", drafts)
        texts.append(result.stdout)
        if drafts != "0":
            assert "mtp: draft 1 accepted" in result.stderr
    assert texts[0] == texts[1] == texts[2]


def test_low_bit_experts_run_and_missing_tables_are_named(run_cli, stores):
    run_cli(stores["c"], "hi", "--experts", "2", "--max-tokens", "4")
    result = run_cli(stores["c"], "hi", "--experts", "3", "--max-tokens", "4", "--no-build-missing-store", check=False)
    assert result.returncode == 1 and "no Q3 expert table" in result.stderr


def test_logits_match_the_reference(run_cli, stores):
    ref = load_file(str(FIXTURES / "tiny_c" / "reference" / "logits.safetensors"))
    ids = ref["input_ids.len8"].tolist()
    out = json.loads(run_cli("logits", stores["c"], "--tokens", ",".join(map(str, ids)), "--full", "--json").stdout)
    assert out["tokens"] == ids
    ours = np.array(out["logits"], dtype=np.float32)
    assert np.abs(ours - ref["logits.len8"]).max() < 1e-3
    top = json.loads(run_cli("logits", stores["c"], "--tokens", ",".join(map(str, ids)), "--top", "3", "--json").stdout)
    assert [row[0][0] for row in top["top"]] == ref["logits.len8"].argmax(axis=1).tolist()


def test_perplexity_reports_json(run_cli, stores, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 4)
    out = json.loads(run_cli("perplexity", stores["a"], text, "--ctx", "16", "--json").stdout)
    assert out["scored_tokens"] > 10 and out["perplexity"] > 1.0


def test_bench_reports_throughput(run_cli, stores):
    # Without a cache every decode step reads its experts.
    report = json.loads(run_cli("bench", stores["a"], "--prompt-tokens", "16", "--gen-tokens", "8", "--repeat", "1",
                                "--pool-gb", "0", "--json").stdout)
    assert report["best_prefill_tokens_per_second"] > 0 and report["best_decode_tokens_per_second"] > 0
    assert report["runs"][0]["decode_expert_bytes_per_token"] > 0
    assert report["experts"] is None
    # With the default (adaptive) pool the cache reports its counters.
    report = json.loads(run_cli("bench", stores["a"], "--prompt-tokens", "16", "--gen-tokens", "8", "--repeat", "2",
                                "--json").stdout)
    assert report["experts"]["totals"]["selections"] > 0
    assert report["memory"]["expert_hit_rate"] > 0.5


def test_a_mapped_expert_table_gives_the_same_output_as_the_cache(run_cli, stores):
    """`--pool-gb mapped` (CPU) and `--host-pool-gb mapped` (CUDA) use the table in place: the same
    greedy text and logits as the cache, every expert use served from the mapping, and mixed
    precision (which needs misses to read) refused by name."""
    args = [stores["a"], "def add(a, b):", "--raw", "--max-tokens", "24", "--no-eos", "--drafts", "2"]
    cache = run_cli(*args, "--backend", "cpu")
    mapped = run_cli(*args, "--backend", "cpu", "--pool-gb", "mapped")
    assert mapped.stdout == cache.stdout
    stats = memory_stats_of(mapped.stderr)
    assert stats["expert_pool_bytes"] == 0 and stats["experts_read_bytes"] > 0
    assert "expert_hit_rate" not in stats
    ids = ",".join(str(i) for i in range(1, 30))
    logits = {pool: np.array(json.loads(run_cli("logits", stores["a"], "--tokens", ids, "--full", "--json",
                                                "--backend", "cpu", "--pool-gb", pool).stdout)["logits"])
              for pool in ("adaptive", "mapped")}
    assert np.array_equal(logits["adaptive"], logits["mapped"])
    result = run_cli(stores["c"], "hi", "--backend", "cpu", "--pool-gb", "mapped", "--miss-experts", "2", check=False)
    assert result.returncode == 1 and "--miss-experts 2 needs the expert cache" in result.stderr
    cuda = run_cli(*args, "--backend", "cuda", "--host-pool-gb", "mapped", check=False)
    if cuda.returncode == 0:
        assert cuda.stdout == cache.stdout
    else:
        assert "no CUDA device" in cuda.stderr or "built without CUDA" in cuda.stderr


def test_int8_activations_stay_near_the_reference_and_are_reported(run_cli, stores):
    """`--cpu-activations q8`: the logits move off the transformers reference by an 8-bit rounding of
    the activations (docs/engine.md), not by the float path's 1e-5; the report names the mode."""
    ref = load_file(str(FIXTURES / "tiny_c" / "reference" / "logits.safetensors"))
    ids = ref["input_ids.len33"].tolist()
    args = ["logits", stores["c"], "--tokens", ",".join(map(str, ids)), "--full", "--json"]
    expected = ref["logits.len33"]
    f32 = np.array(json.loads(run_cli(*args).stdout)["logits"], dtype=np.float32).reshape(expected.shape)
    q8 = np.array(json.loads(run_cli(*args, "--cpu-activations", "q8").stdout)["logits"],
                  dtype=np.float32).reshape(expected.shape)
    assert np.abs(f32 - expected).max() < 1e-3
    relative = np.sqrt(np.mean((q8 - expected) ** 2) / np.mean(expected ** 2))
    assert 1e-4 < relative < 0.05
    report = json.loads(run_cli("bench", stores["a"], "--prompt-tokens", "8", "--gen-tokens", "4", "--repeat", "1",
                                "--cpu-activations", "q8", "--json").stdout)
    assert report["memory"]["cpu_activations"] == "q8"
    bad = run_cli(stores["a"], "hi", "--cpu-activations", "int8", check=False)
    assert bad.returncode != 0 and "--cpu-activations" in bad.stderr


def test_bench_measures_sampled_decoding(run_cli, stores):
    args = ["bench", stores["a"], "--prompt-tokens", "8", "--gen-tokens", "6", "--repeat", "1", "--json"]
    report = json.loads(run_cli(*args, "--temperature", "0.8", "--top-p", "0.9").stdout)
    assert report["temperature"] == pytest.approx(0.8) and report["top_p"] == pytest.approx(0.9)
    assert report["runs"][0]["decode_steps"] >= 5 and report["best_decode_tokens_per_second"] > 0
    greedy = json.loads(run_cli(*args).stdout)
    assert greedy["temperature"] == 0


@pytest.mark.parametrize("args,message", [
    (["logits", "{a}", "--tokens", "1,2,9999", "--json"], "outside the vocabulary"),
    (["logits", "{a}", "--tokens", "1,x", "--json"], "not a token id"),
    (["{a}", "hello there", "--max-ctx", "4"], "--max-ctx"),
    (["{checkpoint}", "hello"], "not a prepared store"),
    (["bench", "{a}", "--drafts", "1", "--temperature", "0.5"], "--drafts needs greedy"),
    (["bench", "{a}", "--temperature", "-1"], "temperature"),
])
def test_bad_input_gets_a_clear_error(run_cli, stores, args, message):
    args = [a.format(a=stores["a"], checkpoint=FIXTURES / "tiny_b" / "hf_nested_experts_sharded") for a in args]
    result = run_cli(*args, check=False)
    assert result.returncode != 0 and message in result.stderr


def test_corrupt_store_is_detected_before_work(run_cli, stores, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(stores["a"], broken)
    with open(broken / "dense.bin", "r+b") as f:
        f.truncate(1000)
    result = run_cli(broken, "hello", check=False)
    assert result.returncode == 1 and "dense.bin" in result.stderr


def test_backend_auto_runs_and_cuda_matches_cpu_or_says_why_not(run_cli, stores):
    """With a CUDA device the GPU's greedy text and logits equal the CPU's; without one (or in a
    build without CUDA) asking for it is a clear error and `auto` falls back to the CPU."""
    args = [stores["a"], "def add(a, b):", "--raw", "--max-tokens", "24", "--no-eos"]
    cpu = run_cli(*args, "--backend", "cpu")
    assert "backend: cpu" in cpu.stderr
    auto = run_cli(*args, "--backend", "auto")
    assert auto.stdout == cpu.stdout
    cuda = run_cli(*args, "--backend", "cuda", check=False)
    if cuda.returncode != 0:
        assert "no CUDA device" in cuda.stderr or "built without CUDA" in cuda.stderr
        assert "backend: cpu" in auto.stderr
        return
    assert "backend: cuda" in cuda.stderr
    assert cuda.stdout == cpu.stdout
    ids = ",".join(str(i) for i in range(1, 30))
    on = {b: np.array(json.loads(run_cli("logits", stores["a"], "--tokens", ids, "--full", "--json",
                                         "--backend", b).stdout)["logits"], dtype=np.float32)
          for b in ("cpu", "cuda")}
    assert np.abs(on["cpu"] - on["cuda"]).max() < 1e-3


def test_check_runs_the_reference_beside_the_backend(run_cli, stores):
    result = run_cli(stores["a"], "Hello", "--max-tokens", "8", "--no-eos", "--drafts", "2", "--check")
    lines = [line for line in result.stderr.splitlines() if line.startswith("check: ")]
    assert any(line.startswith("check: forward") for line in lines)
    assert any(line.startswith("check: mtp") for line in lines)
    for line in lines:
        diff = float(line.split("max |logit diff| ")[1].split(" ")[0])
        assert diff < 1e-3, line


def memory_stats_of(stderr):
    line = next(line for line in stderr.splitlines() if line.startswith("memory_stats "))
    return json.loads(line[len("memory_stats "):])


def test_prefill_quantum_changes_the_chunks_not_the_output(run_cli, stores, tmp_path):
    """--prefill-quantum 3 cuts every prompt into 3-token calls: the same greedy text (drafts on,
    so MTP catch-up spans chunks), logits and perplexity as the default's one call, and the
    reports say which chunk was used."""
    args = [stores["a"], "def add(a, b):", "--raw", "--max-tokens", "24", "--no-eos"]
    default = run_cli(*args)
    small = run_cli(*args, "--prefill-quantum", "3")
    assert small.stdout == default.stdout
    assert "chunk(s) of up to 3\n" in small.stderr and "1 chunk(s) of up to 512\n" in default.stderr
    stats = memory_stats_of(small.stderr)
    assert stats["prefill_quantum"] == 3 and stats["prefill_chunk_tokens"] == 3
    assert memory_stats_of(default.stderr)["prefill_chunk_tokens"] == 512

    ids = ",".join(str(i) for i in range(1, 30))
    logits = {q: np.array(json.loads(run_cli("logits", stores["a"], "--tokens", ids, "--full", "--json",
                                             "--prefill-quantum", q).stdout)["logits"], dtype=np.float32)
              for q in ("3", "256")}
    assert logits["3"].shape == logits["256"].shape == (29, logits["256"].shape[1])
    assert np.abs(logits["3"] - logits["256"]).max() < 1e-4

    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 4)
    ppl = {q: json.loads(run_cli("perplexity", stores["a"], text, "--ctx", "16", "--json",
                                 "--prefill-quantum", q).stdout)["perplexity"] for q in ("3", "256")}
    assert abs(ppl["3"] - ppl["256"]) < 1e-4 * ppl["256"]


def test_bench_reports_the_prefill_chunk(run_cli, stores):
    bench = ["bench", stores["a"], "--prompt-tokens", "16", "--gen-tokens", "4", "--repeat", "1", "--json"]
    small = json.loads(run_cli(*bench, "--prefill-quantum", "3").stdout)
    assert small["prefill_quantum"] == 3 and small["prefill_chunk_tokens"] == 3
    assert small["runs"][0]["prefill_chunks"] == 6  # 16 tokens in calls of 3
    assert small["memory"]["prefill_chunk_tokens"] == 3
    default = json.loads(run_cli(*bench).stdout)
    assert default["prefill_quantum"] == 512 and default["prefill_chunk_tokens"] == 512
    assert default["runs"][0]["prefill_chunks"] == 1


@pytest.mark.parametrize("command", [
    ["{a}", "hello"],
    ["logits", "{a}", "--tokens", "1,2,3", "--json"],
    ["perplexity", "{a}", "{text}"],
    ["bench", "{a}", "--repeat", "1", "--json"],
])
@pytest.mark.parametrize("value", ["0", "65537", "many"])
def test_bad_prefill_quantum_is_an_error_naming_the_flag(run_cli, stores, tmp_path, command, value):
    text = tmp_path / "text.txt"
    text.write_text("hello there, general kenobi")
    args = [a.format(a=stores["a"], text=text) for a in command] + ["--prefill-quantum", value]
    result = run_cli(*args, check=False)
    assert result.returncode != 0 and "--prefill-quantum" in result.stderr, result.stderr
    assert result.stdout == ""
