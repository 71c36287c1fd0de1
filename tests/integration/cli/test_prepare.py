"""`cherenkov prepare` / `pack`: every fixture form packs, BF16 and MLX forms of the same weights
give the same records, dense tensors decode within Q4 error, interrupted packing publishes
nothing, and existing stores are reused or reported corrupt."""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"


def read_safetensors(directory):
    """name -> (dtype, shape, bytes) over every safetensors file of a checkpoint."""
    tensors = {}
    for path in sorted(Path(directory).glob("*.safetensors")):
        data = path.read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            tensors[name] = (info["dtype"], info["shape"], data[8 + n + begin:8 + n + end])
    return tensors


def bf16_to_f32(raw):
    return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def dequantize(codes, scales, biases, rows, cols, group):
    """4-bit MLX affine, low nibble first (docs/formats.md 2.4)."""
    packed = np.frombuffer(codes, dtype=np.uint8).reshape(rows, cols // 2)
    q = np.empty((rows, cols), dtype=np.float32)
    q[:, 0::2] = packed & 0x0F
    q[:, 1::2] = packed >> 4
    s = np.repeat(bf16_to_f32(scales).reshape(rows, cols // group), group, axis=1)
    b = np.repeat(bf16_to_f32(biases).reshape(rows, cols // group), group, axis=1)
    return q * s + b, s


def canonical(name):
    for prefix in ("model.language_model.",):
        if name.startswith(prefix):
            return "model." + name[len(prefix):]
    return name


def pack(run_cli, source, output, *flags):
    return run_cli("prepare", source, "--output", output, *flags)


FORMS = [
    ("fixture", "tiny_a/hf_flat_fused"),
    ("fixture", "tiny_b/hf_nested_experts_sharded"),
    ("fixture", "tiny_c/hf_nested_fused"),
    ("fixture", "tiny_c/mlx_q4"),
    ("random", ()),
    ("random", ("--form", "nested", "--experts", "per-expert", "--mtp", "--shards", "3")),
    ("random", ("--form", "flat", "--experts", "per-expert")),
    ("random", ("--form", "nested", "--experts", "fused", "--mtp")),
]


@pytest.mark.parametrize("kind,what", FORMS)
def test_packs_every_form(run_cli, make_tiny_checkpoint, tmp_path, kind, what):
    source = FIXTURES / what if kind == "fixture" else make_tiny_checkpoint(*what)
    out = tmp_path / "store"
    result = pack(run_cli, source, out, "--experts", "4,3,2")
    assert "packed" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "cherenkov-store" and manifest["version"] == 1
    for name, size in manifest["files"].items():
        assert (out / name).stat().st_size == size
    experts = manifest["experts"]
    assert experts["record_bytes"] % 4096 == 0
    layers = experts["n_trunk_layers"] + experts["n_mtp_layers"]
    assert (out / "experts.bin").stat().st_size == layers * experts["n_experts"] * experts["record_bytes"]
    for bits in (3, 2):
        low = json.loads((out / f"manifest{bits}.json").read_text())
        assert low["bits"] == bits and (out / f"experts{bits}.bin").stat().st_size == low["experts_bytes"]
    source_config = json.loads((Path(source) / "config.json").read_text())
    packed_config = json.loads((out / "config.json").read_text())
    text = packed_config.get("text_config", packed_config)
    if not manifest["has_mtp"] and source_config.get("text_config", source_config).get("mtp_num_hidden_layers"):
        assert text["mtp_num_hidden_layers"] == 0
    elif manifest["has_mtp"]:
        assert text["mtp_num_hidden_layers"] >= 1
    assert not list(tmp_path.glob(".store.partial-*"))


def test_bf16_and_mlx_forms_pack_to_equal_records(run_cli, tmp_path):
    pack(run_cli, FIXTURES / "tiny_c/hf_nested_fused", tmp_path / "bf16")
    pack(run_cli, FIXTURES / "tiny_c/mlx_q4", tmp_path / "mlx")
    for name in ("experts.bin", "ngram.bin", "dense.bin"):
        assert (tmp_path / "bf16" / name).read_bytes() == (tmp_path / "mlx" / name).read_bytes(), name


def test_dense_tensors_decode_within_q4_error(run_cli, tmp_path):
    source = FIXTURES / "tiny_a/hf_flat_fused"
    out = tmp_path / "store"
    pack(run_cli, source, out)
    manifest = json.loads((out / "manifest.json").read_text())
    dense = (out / "dense.bin").read_bytes()
    tensors = {canonical(name): value for name, value in read_safetensors(source).items()}
    checked = 0
    for entry in manifest["dense"]:
        if entry["name"] not in tensors:
            continue
        dtype, shape, raw = tensors[entry["name"]]
        if dtype != "BF16":
            continue
        original = bf16_to_f32(raw)
        offset, size = entry["data"]
        if entry["encoding"] == "affine":
            rows, cols = entry["shape"]
            s0, sn = entry["scales"]
            b0, bn = entry["biases"]
            decoded, scales = dequantize(dense[offset:offset + size], dense[s0:s0 + sn], dense[b0:b0 + bn],
                                         rows, cols, entry["group_size"])
            error = np.abs(decoded - original.reshape(rows, cols))
            # MLX affine: at most one step (the far end of a group can be clamped after q0 rounding).
            assert np.all(error <= 1.01 * np.abs(scales) + 1e-6), entry["name"]
        else:
            values = np.frombuffer(dense[offset:offset + size], dtype=np.float32)
            folded = values - 1.0 if entry["name"].endswith(("hc_norm.weight", "q_norm.weight", "k_norm.weight",
                                                              "layernorm.weight", "norm_key.weight",
                                                              "norm_query.weight", "norm_conv.weight",
                                                              "pre_fc_norm_embedding.weight",
                                                              "pre_fc_norm_hidden.weight")) else values
            assert np.allclose(folded, original, atol=1e-6), entry["name"]
        checked += 1
    assert checked > 50


def test_experts_flag_forms_and_reuse(run_cli, tmp_path):
    out = tmp_path / "store"
    source = FIXTURES / "tiny_c/hf_nested_fused"
    first = pack(run_cli, source, out, "--experts", "3")
    assert "packed" in first.stdout and (out / "experts3.bin").exists() and not (out / "experts2.bin").exists()
    stamp = (out / "experts3.bin").stat().st_mtime_ns
    second = run_cli("pack", source, "-o", out, "--experts", "4 2", "--experts", "3")
    assert "reused" in second.stdout and "derived experts2.bin" in second.stdout
    assert (out / "experts3.bin").stat().st_mtime_ns == stamp
    bad = run_cli("prepare", source, "--output", tmp_path / "x", "--experts", "5", check=False)
    assert bad.returncode != 0 and "--experts" in bad.stderr


def test_store_packed_from_another_source_is_kept(run_cli, tmp_path):
    out = tmp_path / "store"
    pack(run_cli, FIXTURES / "tiny_c/hf_nested_fused", out)
    manifest = json.loads((out / "manifest.json").read_text())
    hashed = {f["name"]: f for f in manifest["source"]["files"]}
    assert len(hashed["config.json"]["sha256"]) == 64
    assert len(hashed["model.safetensors"]["header_sha256"]) == 64
    before = (out / "manifest.json").read_bytes()
    result = run_cli("prepare", FIXTURES / "tiny_c/mlx_q4", "--output", out, "--experts", "3", check=False)
    assert result.returncode == 1
    assert f"existing store {out} was packed from" in result.stderr
    assert "different kind" in result.stderr and "remove it or choose another --output" in result.stderr
    assert (out / "manifest.json").read_bytes() == before and not (out / "experts3.bin").exists()
    # A copy of the original source elsewhere is the same source.
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURES / "tiny_c/hf_nested_fused", copy)
    assert "reused" in run_cli("prepare", copy, "--output", out).stdout


def test_plain_progress_lines_when_not_a_terminal(run_cli, tmp_path):
    result = pack(run_cli, FIXTURES / "tiny_c/mlx_q4", tmp_path / "store")
    assert "prepare: experts" in result.stderr and "\r" not in result.stderr


def test_corrupt_store_is_reported(run_cli, tmp_path):
    out = tmp_path / "store"
    source = FIXTURES / "tiny_c/hf_nested_fused"
    pack(run_cli, source, out)
    with open(out / "experts.bin", "r+b") as f:
        f.truncate(4096)
    result = run_cli("prepare", source, "--output", out, check=False)
    assert result.returncode == 1
    assert "truncated" in result.stderr and "experts.bin" in result.stderr
    (out / "manifest.json").write_text("{oops")
    result = run_cli("prepare", source, "--output", out, check=False)
    assert result.returncode == 1 and "manifest.json" in result.stderr


def test_kill_during_packing_publishes_nothing(cherenkov_bin, tmp_path):
    source = tmp_path / "synthetic"
    subprocess.run([sys.executable, str(REPO / "bench" / "pack_synthetic.py"), str(source),
                    "--layers", "2", "--experts", "8"], check=True, capture_output=True)
    out = tmp_path / "store"
    process = subprocess.Popen([cherenkov_bin, "prepare", str(source), "--output", str(out), "--threads", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob(".store.partial-*/experts.bin")):
        time.sleep(0.05)
    time.sleep(0.05)  # mid-way through the experts (the vector quantizer packs them fast)
    if process.poll() is not None:  # reaped by poll: killing it would raise ProcessLookupError
        pytest.skip("packing finished before it could be interrupted")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not out.exists()
    assert list(tmp_path.glob(".store.partial-*"))  # the leftover is beside the store, unpublished
    subprocess.run([cherenkov_bin, "prepare", str(source), "--output", str(out)], check=True, capture_output=True)
    assert (out / "manifest.json").exists()
    assert not list(tmp_path.glob(".store.partial-*"))  # stale leftovers of dead packers are removed


def test_inspect_describes_a_store(run_cli, tmp_path):
    out = tmp_path / "store"
    pack(run_cli, FIXTURES / "tiny_a/hf_flat_fused", out, "--experts", "2")
    text = run_cli("inspect", out).stdout
    assert "Cherenkov store" in text and "1 MTP layers" in text and "Q2" in text
    report = json.loads(run_cli("inspect", "--json", out).stdout)
    assert report["kind"] == "cherenkov-store" and report["sizes_ok"]
    assert report["experts"]["n_mtp_layers"] == 1
    assert any(entry["name"] == "lm_head.weight" for entry in report["dense"])


def write_safetensors(path, tensors):
    header, body = {"__metadata__": {"format": "mlx"}}, b""
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + body)


def test_mlx_main_weights_in_group_32_are_rejected(run_cli, tmp_path):
    """Group 32 is accepted only for the n-gram table: a q_proj at group 32 is refused."""
    source = tmp_path / "mlx_g32"
    source.mkdir()
    for path in (FIXTURES / "tiny_c/mlx_q4").iterdir():
        if not path.name.startswith("model"):
            (source / path.name).write_bytes(path.read_bytes())
    tensors = read_safetensors(FIXTURES / "tiny_c/mlx_q4")
    module = "model.layers.0.self_attn.q_proj"
    for part in ("scales", "biases"):
        dtype, shape, raw = tensors[f"{module}.{part}"]
        tensors[f"{module}.{part}"] = (dtype, [shape[0], 2], raw + raw)
    write_safetensors(source / "model.safetensors", tensors)
    index = json.loads((FIXTURES / "tiny_c/mlx_q4/model.safetensors.index.json").read_text())
    index["weight_map"] = {name: "model.safetensors" for name in tensors}
    (source / "model.safetensors.index.json").write_text(json.dumps(index))
    config = json.loads((source / "config.json").read_text())
    for key in ("quantization", "quantization_config"):
        config[key][module] = {"bits": 4, "group_size": 32}
    (source / "config.json").write_text(json.dumps(config))
    result = run_cli("prepare", source, "--output", tmp_path / "store", check=False)
    assert result.returncode == 1
    assert "Cherenkov needs group size 64; 32 is accepted only for the n-gram table" in result.stderr
    assert module in result.stderr
    assert not (tmp_path / "store").exists()
