"""bench/synthetic_store.py: a small synthetic MLX 4-bit checkpoint has the mlx-lm layout of the
tiny_c/mlx_q4 fixture, plausible weights, packs with `cherenkov prepare` and runs
`cherenkov bench` without tokenizer files."""
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools"))
from fixtures import mlx_quant as mq  # noqa: E402

LAYERS, EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, VOCAB = 2, 16, 10, 512, 128, 4096


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n))


def read_tensor(path, name):
    n, h = header(path)
    info = h[name]
    begin, end = info["data_offsets"]
    with open(path, "rb") as f:
        f.seek(8 + n + begin)
        raw = f.read(end - begin)
    dtype = {"U32": "<u4", "BF16": "<u2", "I64": "<i8"}[info["dtype"]]
    return np.frombuffer(raw, dtype=dtype).reshape(info["shape"])


def pattern(name):
    """Tensor name with layer and shard numbers removed."""
    return re.sub(r"shard_\d+", "shard_J", re.sub(r"layers\.\d+\.", "layers.N.", name))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic") / "source"
    subprocess.run([sys.executable, str(REPO / "bench" / "synthetic_store.py"), str(out),
                    "--layers", str(LAYERS), "--experts", str(EXPERTS), "--top-k", str(TOP_K),
                    "--hidden", str(HIDDEN), "--intermediate", str(INTERMEDIATE), "--vocab", str(VOCAB),
                    "--ngram-base", "1000"], check=True, capture_output=True, timeout=60)
    return out


def test_layout_matches_the_mlx_fixture(synthetic):
    _, ours = header(synthetic / "model.safetensors")
    _, fixture = header(REPO / "tests" / "fixtures" / "tiny_c" / "mlx_q4" / "model.safetensors")
    assert ours.pop("__metadata__") == fixture.pop("__metadata__") == {"format": "mlx"}
    kinds = lambda h: {(pattern(k), v["dtype"]) for k, v in h.items()}  # noqa: E731
    assert kinds(ours) == kinds(fixture)
    assert ours["model.layers.0.mlp.switch_mlp.gate_proj.weight"]["shape"] == [EXPERTS, INTERMEDIATE, HIDDEN // 8]
    assert ours["model.layers.0.mlp.switch_mlp.down_proj.scales"]["shape"] == [EXPERTS, HIDDEN, INTERMEDIATE // 64]
    assert ours["model.layers.0.ple.ple_embedding.ngram_embedding.shard_0.scales"]["shape"][1] == (HIDDEN // 16) // 32
    config = json.loads((synthetic / "config.json").read_text())
    assert config["quantization"] == config["quantization_config"]
    assert config["quantization"]["model.layers.0.ple.ple_embedding.ngram_embedding.shard_0"] == {"group_size": 32, "bits": 4}
    text = config["text_config"]
    assert text["layer_types"] == ["linear_attention", "full_attention"] and text["ple_layer_ids"] == [1]
    assert (text["num_experts"], text["num_experts_per_tok"], text["hidden_size"]) == (EXPERTS, TOP_K, HIDDEN)
    index = json.loads((synthetic / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(ours)
    assert not list(synthetic.glob("tokenizer*"))


def test_weights_are_plausible(synthetic):
    path = synthetic / "model.safetensors"
    base = "model.layers.1.mlp.switch_mlp.down_proj"
    words, scales, biases = (read_tensor(path, f"{base}.{part}")[3] for part in ("weight", "scales", "biases"))
    w = mq.dequantize(mq.unpack(words, 4, INTERMEDIATE), scales, biases, 64)
    assert abs(w.std() * np.sqrt(INTERMEDIATE) - 1.0) < 0.15  # std 1/sqrt(fan_in)
    assert abs(w.mean()) < 0.1 / np.sqrt(INTERMEDIATE)
    q = mq.unpack(words, 4, INTERMEDIATE)
    assert np.bincount(q.ravel(), minlength=16).min() > 0.8 * q.size / 16  # uniform codes


def test_prepare_and_bench(synthetic, run_cli, tmp_path):
    store = tmp_path / "store"
    run_cli("prepare", synthetic, "--output", store)
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["source"]["kind"] == "mlx-affine"
    experts = manifest["experts"]
    assert (experts["n_trunk_layers"], experts["n_experts"], experts["hidden"], experts["intermediate"]) == \
        (LAYERS, EXPERTS, HIDDEN, INTERMEDIATE)
    record = experts["record_bytes"]
    assert record == 110592  # codes 3*128*512/2 + BF16 scales and biases 3*128*512/64*4, 4096-aligned

    # No cache (--pool-gb 0): every decode step reads its experts, so bytes per token are known.
    result = run_cli("bench", store, "--prompt-tokens", 16, "--gen-tokens", 4, "--repeat", 1, "--pool-gb", "0", "--json")
    report = json.loads(result.stdout)
    assert report["best_prefill_tokens_per_second"] > 0 and report["best_decode_tokens_per_second"] > 0
    run = report["runs"][0]
    assert 0 < run["decode_expert_bytes_per_token"] <= LAYERS * TOP_K * record
    assert 0 < run["prefill_expert_bytes_per_token"] <= LAYERS * TOP_K * record
    assert report["memory"]["peak_rss_bytes"] > 0
