"""`cherenkov inspect` on GGUF files written by the official gguf-py writer.

Every expectation comes from gguf-py: the values we wrote and what gguf.GGUFReader reads back
(data offset, tensor offsets, byte sizes), never from Cherenkov's own earlier output.
Needs CHERENKOV_BIN (the built `cherenkov` executable); skipped when it is unset.
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from gguf import GGMLQuantizationType, GGUFValueType  # noqa: E402

CHERENKOV_BIN = os.environ.get("CHERENKOV_BIN")
pytestmark = pytest.mark.skipif(not CHERENKOV_BIN, reason="CHERENKOV_BIN is not set")

TOKENS = ["!", '"', "#", "héllo", "<0x0A>"] + [f"tok{i}" for i in range(200)]

# key -> (value, GGUFValueType, array element type or None), in writing order.
METADATA = {
    "general.name": ("tiny test model", GGUFValueType.STRING, None),
    "test.u8": (250, GGUFValueType.UINT8, None),
    "test.i8": (-100, GGUFValueType.INT8, None),
    "test.u16": (65000, GGUFValueType.UINT16, None),
    "test.i16": (-32000, GGUFValueType.INT16, None),
    "qwen3moe.expert_count": (128, GGUFValueType.UINT32, None),
    "test.i32": (-2_000_000_000, GGUFValueType.INT32, None),
    "qwen3moe.rope.freq_base": (1_000_000.0, GGUFValueType.FLOAT32, None),
    "test.f32": (0.1, GGUFValueType.FLOAT32, None),
    "test.bool_true": (True, GGUFValueType.BOOL, None),
    "test.bool_false": (False, GGUFValueType.BOOL, None),
    "test.u64": (2**64 - 1, GGUFValueType.UINT64, None),
    "test.i64": (-(2**63), GGUFValueType.INT64, None),
    "test.f64": (-1.25e-300, GGUFValueType.FLOAT64, None),
    "tokenizer.ggml.tokens": (TOKENS, GGUFValueType.ARRAY, GGUFValueType.STRING),
    "tokenizer.ggml.scores": ([0.5, -1.25, 3.0], GGUFValueType.ARRAY, GGUFValueType.FLOAT32),
    "tokenizer.ggml.token_type": ([1, 2, 3, 6], GGUFValueType.ARRAY, GGUFValueType.INT32),
    "test.u64_array": ([0, 2**64 - 1], GGUFValueType.ARRAY, GGUFValueType.UINT64),
    "test.u8_array": ([0, 1, 255], GGUFValueType.ARRAY, GGUFValueType.UINT8),
    "test.bool_array": ([True, False, True], GGUFValueType.ARRAY, GGUFValueType.BOOL),
    "test.f64_array": ([1.5, -2.0], GGUFValueType.ARRAY, GGUFValueType.FLOAT64),
}


def write_gguf(path: Path, alignment: int | None = None) -> dict[str, np.ndarray]:
    """Writes a small qwen3moe-flavoured GGUF; returns the tensors by name, row-major."""
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_quantization_version(2)
    for key, (value, vtype, sub_type) in METADATA.items():
        writer.add_key_value(key, value, vtype, sub_type=sub_type)

    rng = np.random.default_rng(7)
    tensors = {
        "token_embd.weight": rng.standard_normal((6, 64)).astype(np.float32),
        "output_norm.weight": rng.standard_normal(64).astype(np.float32),
        "blk.0.attn_q.weight": rng.standard_normal((3, 64)).astype(np.float16),
    }
    for name, array in tensors.items():
        writer.add_tensor(name, array)

    q8_source = rng.standard_normal((4, 96)).astype(np.float32)
    if hasattr(gguf, "quants") and hasattr(gguf.quants, "quantize"):
        q8 = gguf.quants.quantize(q8_source, GGMLQuantizationType.Q8_0)
    else:  # raw Q8_0 blocks: 4 rows x 3 blocks x 34 bytes
        q8 = np.zeros((4, 3 * 34), dtype=np.uint8)
    writer.add_tensor("blk.0.ffn_down_exps.weight", q8, raw_dtype=GGMLQuantizationType.Q8_0)
    tensors["blk.0.ffn_down_exps.weight"] = q8_source

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def run_inspect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHERENKOV_BIN, "inspect", *args], capture_output=True, text=True,
                          timeout=60)


def inspect_json(path: Path) -> dict:
    result = run_inspect(str(path), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def type_name(field: "gguf.ReaderField") -> str:
    names = [GGUFValueType(t).name.lower() for t in field.types]
    text = names[-1]
    for outer in reversed(names[:-1]):
        text = f"{outer}[{text}]"
    return text


def expect_same_value(actual, expected, vtype: GGUFValueType, key: str) -> None:
    if vtype == GGUFValueType.FLOAT32:
        assert np.float32(actual) == np.float32(expected), key
    elif vtype == GGUFValueType.FLOAT64:
        assert float(actual) == float(expected), key
    elif vtype == GGUFValueType.BOOL:
        assert actual is bool(expected), key
    elif vtype == GGUFValueType.STRING:
        assert actual == expected, key
    else:
        assert isinstance(actual, int) and not isinstance(actual, bool), key
        assert actual == int(expected), key


@pytest.mark.parametrize("alignment", [None, 64])
def test_json_matches_what_gguf_py_wrote(tmp_path: Path, alignment: int | None) -> None:
    path = tmp_path / "tiny.gguf"
    tensors = write_gguf(path, alignment)
    reader = gguf.GGUFReader(str(path))
    report = inspect_json(path)

    assert report["format"] == "gguf"
    assert report["path"].endswith("tiny.gguf")
    assert report["version"] == 3
    assert report["alignment"] == (alignment or 32) == int(reader.alignment)
    assert report["data_offset"] == reader.data_offset
    assert report["data_offset"] % report["alignment"] == 0
    assert report["file_size"] == path.stat().st_size
    assert report["architecture"] == "qwen3moe"
    assert report["engine_support"]["supported"] is False
    assert "inspection only" in report["engine_support"]["reason"]

    # Every key gguf-py reads back is reported, with its exact type and value.
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert set(report["metadata"]) == set(fields)
    assert set(report["metadata_types"]) == set(fields)
    for key, field in fields.items():
        assert report["metadata_types"][key] == type_name(field), key
    assert report["metadata"]["general.architecture"] == "qwen3moe"
    assert report["metadata"]["general.quantization_version"] == 2
    assert report["metadata_types"]["general.quantization_version"] == "uint32"
    if alignment is not None:
        assert report["metadata"]["general.alignment"] == alignment
        assert report["metadata_types"]["general.alignment"] == "uint32"

    for key, (value, vtype, sub_type) in METADATA.items():
        actual = report["metadata"][key]
        if vtype == GGUFValueType.ARRAY:
            assert report["metadata_types"][key] == f"array[{sub_type.name.lower()}]"
            assert isinstance(actual, list) and len(actual) == len(value), key
            for item, expected in zip(actual, value):
                expect_same_value(item, expected, sub_type, key)
            assert actual == fields[key].contents() or sub_type in (
                GGUFValueType.FLOAT32, GGUFValueType.FLOAT64), key
        else:
            assert report["metadata_types"][key] == vtype.name.lower(), key
            expect_same_value(actual, value, vtype, key)
            expect_same_value(actual, fields[key].contents(), vtype, key)
    assert report["metadata"]["test.f32"] == 0.1  # shortest float32 decimal
    assert report["metadata"]["test.u64"] == 2**64 - 1

    # Tensors: row-major shapes, absolute offsets and sizes as gguf-py computes them.
    by_name = {t.name: t for t in reader.tensors}
    assert [t["name"] for t in report["tensors"]] == [t.name for t in reader.tensors]
    for entry in report["tensors"]:
        expected = by_name[entry["name"]]
        assert entry["shape"] == [int(d) for d in reversed(expected.shape.tolist())]
        assert entry["shape"] == list(tensors[entry["name"]].shape)
        assert entry["ggml_type"] == expected.tensor_type.name
        assert entry["type_id"] == int(expected.tensor_type)
        assert entry["offset"] == expected.data_offset
        assert entry["offset"] % report["alignment"] == 0
        assert entry["n_bytes"] == expected.n_bytes
        block, type_size = gguf.GGML_QUANT_SIZES[expected.tensor_type]
        assert entry["n_bytes"] == int(np.prod(entry["shape"])) // block * type_size
    types = {t["name"]: t["ggml_type"] for t in report["tensors"]}
    assert types == {
        "token_embd.weight": "F32",
        "output_norm.weight": "F32",
        "blk.0.attn_q.weight": "F16",
        "blk.0.ffn_down_exps.weight": "Q8_0",
    }
    last = max(report["tensors"], key=lambda t: t["offset"])
    assert last["offset"] + last["n_bytes"] <= report["file_size"]


def test_text_report(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    write_gguf(path)
    result = run_inspect(str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "qwen3moe" in out
    assert "blk.0.ffn_down_exps.weight" in out
    assert "[4, 96]" in out
    assert "Q8_0" in out
    assert f"[{len(TOKENS)} strings: " in out  # long arrays are abbreviated
    assert "tok199" not in out


def test_truncated_file_fails_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    write_gguf(path)
    reader = gguf.GGUFReader(str(path))
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    for length in (reader.data_offset // 2, reader.data_offset + 10):
        cut.write_bytes(data[:length])
        for args in ((str(cut),), (str(cut), "--json")):
            result = run_inspect(*args)
            assert result.returncode == 1, (length, result.stdout)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1, result.stderr
            assert str(cut) in lines[0]
