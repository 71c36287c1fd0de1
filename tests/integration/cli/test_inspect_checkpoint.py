"""`cherenkov inspect` on safetensors checkpoints and files written by independent writers
(the PyPI safetensors package, numpy) and by tools/make_tiny_checkpoint.py."""
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file


def read_header(path):
    """Parses a safetensors header independently of Cherenkov: (data_offset, entries)."""
    raw = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    header.pop("__metadata__", None)
    return 8 + length, header


def inspect_json(run_cli, target):
    return json.loads(run_cli("inspect", target, "--json").stdout)


def test_single_file_written_by_safetensors_package(run_cli, tmp_path):
    arrays = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f16": np.linspace(-1, 1, 10, dtype=np.float16),
        "i64": np.array([1, -2, 3], dtype=np.int64),
        "u8": np.arange(7, dtype=np.uint8),
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "u32": np.arange(4, dtype=np.uint32),
        "f64": np.array([3.5], dtype=np.float64),
        "bool": np.array([True, False]),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    path = tmp_path / "x.safetensors"
    save_file(arrays, str(path), metadata={"format": "np", "note": "written by safetensors"})
    report = inspect_json(run_cli, path)
    assert report["kind"] == "safetensors"
    assert report["files"][0]["metadata"] == {"format": "np", "note": "written by safetensors"}
    by_name = {t["name"]: t for t in report["tensors"]}
    assert set(by_name) == set(arrays)
    dtype_names = {"f32": "F32", "f16": "F16", "i64": "I64", "u8": "U8", "i32": "I32", "u32": "U32", "f64": "F64",
                   "bool": "BOOL", "scalar": "F32", "empty": "F32"}
    raw = path.read_bytes()
    for name, array in arrays.items():
        tensor = by_name[name]
        assert tensor["dtype"] == dtype_names[name]
        assert tensor["shape"] == list(array.shape)
        assert tensor["n_bytes"] == array.nbytes
        assert raw[tensor["offset"]:tensor["end"]] == array.tobytes()
    text = run_cli("inspect", path).stdout
    assert "f16" in text and "[3, 4]" in text


@pytest.mark.parametrize("flags", [
    ["--form", "flat", "--experts", "fused", "--mtp"],
    ["--form", "nested", "--experts", "per-expert"],
    ["--form", "flat", "--experts", "per-expert", "--shards", "3"],
    ["--form", "nested", "--experts", "fused", "--mtp", "--shards", "2"],
])
def test_tiny_checkpoint_forms(run_cli, make_tiny_checkpoint, flags):
    checkpoint = make_tiny_checkpoint(*flags)
    report = inspect_json(run_cli, checkpoint)
    assert report["kind"] == "checkpoint"
    expected = {}
    for shard in sorted(checkpoint.glob("*.safetensors")):
        data_offset, header = read_header(shard)
        for name, entry in header.items():
            expected[name] = (shard.name, entry["dtype"], entry["shape"],
                              data_offset + entry["data_offsets"][0], data_offset + entry["data_offsets"][1])
    got = {t["name"]: (t["file"] if "/" not in t["file"] else Path(t["file"]).name, t["dtype"], t["shape"], t["offset"],
                       t["end"]) for t in report["tensors"]}
    assert got == expected
    assert all("role" in t for t in report["tensors"]), [t["name"] for t in report["tensors"] if "role" not in t]
    section = report["qwen4_exp"]
    assert section["config"]["text_config"]["num_hidden_layers"] == 4
    assert section["config"]["form"] == flags[flags.index("--form") + 1]
    assert section["config"]["derived"]["rotary_dim"] == 8
    layout = section["layout"]
    assert layout["expert_form"] == ("fused" if "fused" in flags else "per_expert")
    assert layout["ok"] is True and layout["missing"] == []
    assert [shard["rows"] for shard in layout["ple_layers"][0]["shards"]] == [142, 142, 140]
    prep = report["preparation"]
    assert prep["supported"] is True
    assert prep["source_format"] == "hf-bf16"
    assert any("quantize" in step and "routed-expert" in step for step in prep["steps"])
    assert any("n-gram" in step for step in prep["steps"])
    mtp_step = [s for s in prep["steps"] if "MTP" in s]
    assert mtp_step and (("keep the MTP head" in mtp_step[0]) == ("--mtp" in flags))
    if "--shards" in flags:
        assert report["index"]["n_shards"] == int(flags[flags.index("--shards") + 1])
    text = run_cli("inspect", checkpoint).stdout
    assert "qwen4_exp" in text and "preparation: supported" in text


def write_mlx_checkpoint(directory, group_size_main, group_size_ngram=32, mode=None):
    """A minimal MLX-style checkpoint: packed U32 codes with F16 scales/biases (numpy has no
    bf16), written by the safetensors package. Values are arbitrary; inspection reads shapes."""
    rng = np.random.default_rng(0)
    h, v = 64, 256
    tensors = {}

    def quantized(module, out_dim, in_dim, bits=4, group=64):
        tensors[module + ".weight"] = rng.integers(0, 2**32, (out_dim, in_dim * bits // 32), dtype=np.uint32)
        tensors[module + ".scales"] = rng.standard_normal((out_dim, in_dim // group)).astype(np.float16)
        tensors[module + ".biases"] = rng.standard_normal((out_dim, in_dim // group)).astype(np.float16)

    quantized("model.embed_tokens", v, h, group=group_size_main)
    tensors["model.norm_probe.weight"] = np.zeros(h, dtype=np.float16)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
              "quantization": {"group_size": group_size_main, "bits": 4}}
    if mode:
        config["quantization"]["mode"] = mode
    Path(directory).mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(Path(directory) / "model.safetensors"), metadata={"format": "mlx"})
    (Path(directory) / "config.json").write_text(json.dumps(config))
    return tensors


def test_mlx_logical_tensors_for_other_architectures(run_cli, tmp_path):
    write_mlx_checkpoint(tmp_path / "m", 64)
    report = inspect_json(run_cli, tmp_path / "m")
    logical = {t["name"]: t for t in report["logical_tensors"]}
    embed = logical["model.embed_tokens.weight"]
    assert embed["encoding"] == "mlx-affine-q4-g64"
    assert embed["shape"] == [256, 64]
    assert embed["parts"] == {"weight": "model.embed_tokens.weight", "scales": "model.embed_tokens.scales",
                              "biases": "model.embed_tokens.biases"}
    assert logical["model.norm_probe.weight"]["encoding"] == "F16"
    assert report["preparation"]["supported"] is False
    assert "llama" in report["preparation"]["reasons"][0]


def tiny_mlx_qwen(make_tiny_checkpoint, tmp_path, group_main):
    """Turns the tiny BF16 checkpoint's embedding into an MLX-packed tensor with the given group."""
    source = make_tiny_checkpoint("--form", "flat")
    target = tmp_path / f"mlx{group_main}"
    shutil.copytree(source, target)
    from safetensors import safe_open
    path = target / "model.safetensors"
    tensors = {}
    with safe_open(str(path), "np") as reader:
        names = list(reader.keys())
    # BF16 cannot be loaded through numpy; rebuild the file with the header-declared raw bytes.
    data_offset, header = read_header(path)
    raw = path.read_bytes()
    out = {}
    for name in names:
        entry = header[name]
        begin, end = entry["data_offsets"]
        out[name] = (entry["dtype"], entry["shape"], raw[data_offset + begin:data_offset + end])
    v, h = out["model.embed_tokens.weight"][1]
    out["model.embed_tokens.weight"] = ("U32", [v, h * 4 // 32], bytes(v * h // 2))
    out["model.embed_tokens.scales"] = ("BF16", [v, h // group_main], bytes(v * (h // group_main) * 2))
    out["model.embed_tokens.biases"] = ("BF16", [v, h // group_main], bytes(v * (h // group_main) * 2))
    header_out, data = {}, b""
    for name in sorted(out):
        dtype, shape, payload = out[name]
        header_out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header_out).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    config = json.loads((target / "config.json").read_text())
    config["quantization"] = {"group_size": group_main, "bits": 4}
    config["quantization_config"] = dict(config["quantization"])
    (target / "config.json").write_text(json.dumps(config))
    return target


def test_mlx_group_64_is_accepted(run_cli, make_tiny_checkpoint, tmp_path):
    target = tiny_mlx_qwen(make_tiny_checkpoint, tmp_path, 64)
    report = inspect_json(run_cli, target)
    assert report["preparation"]["source_format"] == "mlx-affine"
    logical = {t["name"]: t for t in report["logical_tensors"]}
    assert logical["model.embed_tokens.weight"]["shape"] == [256, 64]
    assert logical["model.embed_tokens.weight"]["role"].startswith("embed_tokens")


def test_mlx_group_32_main_weights_are_rejected(run_cli, make_tiny_checkpoint, tmp_path):
    target = tiny_mlx_qwen(make_tiny_checkpoint, tmp_path, 32)
    result = run_cli("inspect", target, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Cherenkov needs group size 64; 32 is accepted only for the n-gram table" in lines[0]
    assert str(target) in lines[0]


def test_invalid_config_names_the_field(run_cli, make_tiny_checkpoint, tmp_path):
    target = tmp_path / "bad"
    shutil.copytree(make_tiny_checkpoint(), target)
    config = json.loads((target / "config.json").read_text())
    config["num_experts_per_tok"] = 99
    (target / "config.json").write_text(json.dumps(config))
    result = run_cli("inspect", target, "--json", check=False)
    assert result.returncode == 1
    assert result.stdout == ""
    line = result.stderr.strip()
    assert "\n" not in line and "config.json" in line and "num_experts_per_tok" in line


def test_missing_tensor_is_reported(run_cli, make_tiny_checkpoint, tmp_path):
    source = make_tiny_checkpoint()
    target = tmp_path / "missing"
    shutil.copytree(source, target)
    path = target / "model.safetensors"
    data_offset, header = read_header(path)
    raw = path.read_bytes()
    victim = "model.layers.0.linear_attn.out_proj.weight"
    out, data = {}, b""
    for name in sorted(header):
        if name == victim:
            continue
        begin, end = header[name]["data_offsets"]
        payload = raw[data_offset + begin:data_offset + end]
        out[name] = {"dtype": header[name]["dtype"], "shape": header[name]["shape"],
                     "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(out).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    result = run_cli("inspect", target, check=False)
    assert result.returncode == 1
    assert victim in result.stderr


@pytest.mark.parametrize("cut", [0, 5, 8, 100, -1])
def test_truncated_shard_gives_one_line(run_cli, make_tiny_checkpoint, tmp_path, cut):
    target = tmp_path / "trunc"
    shutil.copytree(make_tiny_checkpoint(), target)
    path = target / "model.safetensors"
    raw = path.read_bytes()
    path.write_bytes(raw[:cut] if cut >= 0 else raw[:-1])
    result = run_cli("inspect", target, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.safetensors" in lines[0], result.stderr


def test_missing_path_and_not_a_checkpoint(run_cli, tmp_path):
    result = run_cli("inspect", tmp_path / "nope", check=False)
    assert result.returncode == 1 and "no such file" in result.stderr
    (tmp_path / "empty").mkdir()
    result = run_cli("inspect", tmp_path / "empty", check=False)
    assert result.returncode == 1 and "safetensors" in result.stderr
    result = run_cli("inspect", check=False)
    assert result.returncode != 0
