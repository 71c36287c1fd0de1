"""The fixture generator's numpy MLX affine quantizer (tools/fixtures/mlx_quant.py).

Checked against the worked examples A-E of docs/formats.md section 2.6, and, when
the `mlx` package imports (the PyPI CPU build: `pip install "mlx[cpu]"`), bit for bit against
`mx.quantize` on MLX's CPU backend (which is the "cpu" variant: true max, round half to even).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from fixtures import mlx_quant as mq  # noqa: E402

BASE = np.array([(k - 20) / 32 for k in range(64)], dtype=np.float32).reshape(1, 64)


def words(x):
    return [int(v) for v in np.asarray(x).reshape(-1)]


def test_bf16_round_nearest_even():
    vals = np.array([1.0, 1.00390625, 1.01171875, -0.13437500596, 3.0e38, 0.0], dtype=np.float32)
    bits = mq.f32_to_bf16_bits(vals)
    # 1 + 2^-8 is a tie between 1.0 and 1.0078125: even wins (1.0); 1 + 3*2^-8 -> 1.015625
    assert words(bits) == [0x3F80, 0x3F80, 0x3F82, 0xBE0A, 0x7F62, 0x0000]
    assert np.array_equal(mq.bf16_bits_to_f32(bits)[:1], np.array([1.0], np.float32))


def test_round_half_away_is_exact_near_half():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.49999997, 2.4999998], dtype=np.float32)
    assert mq.round_half_away(x).tolist() == [1, 2, 3, -1, -3, 0, 0, 2]
    assert mq.round_half_even(x).tolist() == [0, 2, 2, 0, -2, 0, 0, 2]


def test_example_a_4bit():
    r = mq.quantize(BASE, 64, 4, "gpu")
    assert r["q"][0].tolist() == [15, 14, 14, 14, 14, 13, 13, 13, 13, 13, 12, 12, 12, 12, 11, 11,
                                  11, 11, 10, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8, 7,
                                  7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 3, 3, 3,
                                  2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0]
    assert words(r["weight"])[:4] == [0xDDDEEEEF, 0xBBCCCCDD, 0x9AAAAABB, 0x78888999]
    assert r["weight"].shape == (1, 8)
    assert words(r["scales"]) == [0xBE0A] and words(r["biases"]) == [0x3FAC]
    q, s, b = mq.quantize_groups(BASE, 64, 4, "gpu")
    assert s[0, 0] == np.float32(-0.134375) and b[0, 0] == np.float32(1.34375)
    w = mq.dequantize(r["q"], r["scales"], r["biases"], 64)
    assert w[0, 20] == np.float32(-0.00390625)
    assert abs(w[0, 0] - (-0.6777)) < 1e-3
    assert abs(float(np.abs(w - BASE).max()) - 0.068) < 1e-3
    # the CPU variant agrees here (no ties, no all-negative group)
    c = mq.quantize(BASE, 64, 4, "cpu")
    assert np.array_equal(c["weight"], r["weight"])
    assert np.array_equal(mq.unpack(r["weight"], 4, 64), r["q"])


def test_example_b_3bit():
    r = mq.quantize(BASE, 64, 3, "gpu")
    assert r["q"][0, :32].tolist() == [7] * 8 + [6] * 8 + [5] * 9 + [4] * 7
    assert words(r["scales"]) == [0xBE8A] and words(r["biases"]) == [0x3FAC]
    assert r["weight"].shape == (1, 6)
    assert words(r["weight"])[:4] == [0xB6FFFFFF, 0xDB6DDB6D, 0x924925B6, 0x9B6DB6DC]
    assert np.array_equal(mq.unpack(r["weight"], 3, 64), r["q"])


def test_example_c_2bit():
    r = mq.quantize(BASE, 64, 2, "gpu")
    assert r["q"][0].tolist() == [3] * 10 + [2] * 21 + [1] * 22 + [0] * 11
    assert words(r["scales"]) == [0xBF2C] and words(r["biases"]) == [0x3FAC]
    assert words(r["weight"]) == [0xAAAFFFFF, 0x6AAAAAAA, 0x55555555, 0x00000155]
    w = mq.dequantize(r["q"], r["scales"], r["biases"], 64)
    assert w[0, 20] == 0.0


def test_example_d_ties():
    w = np.array([(k - 40) / 32 for k in range(64)], dtype=np.float32).reshape(1, 64)
    q, s, b = mq.quantize_groups(w, 64, 4, "gpu")
    assert s[0, 0] == np.float32(0.125) and b[0, 0] == np.float32(-1.25)
    gpu = mq.quantize(w, 64, 4, "gpu")
    cpu = mq.quantize(w, 64, 4, "cpu")
    assert gpu["q"][0, :16].tolist() == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4]
    assert cpu["q"][0, :16].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 4, 4]
    assert words(gpu["weight"])[0] == 0x22111100
    assert words(cpu["weight"])[0] == 0x22111000


def test_example_e_all_negative_and_zero():
    w = np.array([-10 + k / 64 for k in range(64)], dtype=np.float32).reshape(1, 64)
    qc, sc, bc = mq.quantize_groups(w, 64, 4, "cpu")
    assert abs(float(sc[0, 0]) - 0.0657895) < 1e-6 and bc[0, 0] == -10
    assert qc.min() == 0 and qc.max() == 15
    qg, sg, bg = mq.quantize_groups(w, 64, 4, "gpu")
    assert sg[0, 0] == np.float32(2 / 3) and bg[0, 0] == -10
    assert set(np.unique(qg).tolist()) <= {0, 1}
    # all-positive groups are identical on both backends
    p = np.abs(BASE) + 0.25
    assert np.array_equal(mq.quantize(p, 64, 4, "gpu")["weight"], mq.quantize(p, 64, 4, "cpu")["weight"])
    z = mq.quantize(np.zeros((1, 64), np.float32), 64, 4, "gpu")
    assert words(z["scales"]) == [0xB3D7] and words(z["biases"]) == [0]
    assert not z["q"].any()


def test_batched_shapes_and_group32():
    rng = np.random.default_rng(0)
    w = mq.round_bf16(rng.standard_normal((3, 5, 128)).astype(np.float32))
    r = mq.quantize(w, 32, 4)
    assert r["weight"].shape == (3, 5, 16) and r["scales"].shape == (3, 5, 4)
    # rows are independent: quantizing one expert alone gives the same bytes
    r1 = mq.quantize(w[1], 32, 4)
    assert np.array_equal(r1["weight"], r["weight"][1]) and np.array_equal(r1["scales"], r["scales"][1])
    d = mq.dequantize(r["q"], r["scales"], r["biases"], 32)
    assert np.abs(d - w).max() < 0.5


def _mlx():
    try:
        import mlx.core as mx  # noqa: F401
    except Exception:  # pragma: no cover - depends on the machine
        return None
    return mx


@pytest.mark.parametrize("bits,group", [(4, 64), (4, 32), (3, 64), (2, 64), (8, 64)])
def test_matches_mlx_cpu(bits, group):
    mx = _mlx()
    if mx is None:
        pytest.skip("mlx is not installed (pip install 'mlx[cpu]')")
    rng = np.random.default_rng(bits * 100 + group)
    w = rng.standard_normal((40, 256)).astype(np.float32) * rng.uniform(0.01, 3, (40, 1)).astype(np.float32)
    w[3, :64] = -np.abs(w[3, :64])          # an all-negative group
    w[4, :64] = 0                           # an all-zero group
    w[5, :64] = (np.arange(64) - 40) / 32   # exact ties (example D)
    w = mq.round_bf16(w)
    a = mx.array(w).astype(mx.bfloat16)
    qw, qs, qb = mx.quantize(a, group_size=group, bits=bits)
    ref_w = np.array(qw).view(np.uint32)
    ref_s = mq.f32_to_bf16_bits(np.array(qs.astype(mx.float32)))
    ref_b = mq.f32_to_bf16_bits(np.array(qb.astype(mx.float32)))
    ours = mq.quantize(w, group, bits, "cpu")
    assert np.array_equal(ours["scales"], ref_s)
    assert np.array_equal(ours["biases"], ref_b)
    assert np.array_equal(ours["weight"], ref_w)
    deq = np.array(mx.dequantize(qw, qs, qb, group_size=group, bits=bits).astype(mx.float32))
    mine = mq.dequantize(ours["q"], ours["scales"], ours["biases"], group)
    assert np.abs(mq.round_bf16(mine) - deq).max() <= np.abs(deq).max() * 2 ** -7


# ----------------------------------------------------------------------------- the committed MLX fixture

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def _read_st(path):
    """Minimal safetensors reader (numpy; BF16 returned as uint16 bit patterns)."""
    import json
    import struct

    dt = {"BF16": np.uint16, "F32": np.float32, "U32": np.uint32, "I64": np.int64}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    hdr.pop("__metadata__", None)
    out = {}
    for k, v in hdr.items():
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(data[a:b], dtype=dt[v["dtype"]]).reshape(v["shape"]))
    return out


def test_mlx_fixture_is_the_quantized_bf16_fixture():
    """tiny_c/mlx_q4 holds exactly the GPU-variant quantization of tiny_c/hf_nested_fused."""
    mlx_path = os.path.join(FIX, "tiny_c", "mlx_q4", "model.safetensors")
    hf_path = os.path.join(FIX, "tiny_c", "hf_nested_fused", "model.safetensors")
    if not (os.path.exists(mlx_path) and os.path.exists(hf_path)):
        pytest.skip("fixtures not generated")
    m, h = _read_st(mlx_path), _read_st(hf_path)
    checked = 0
    for name, (dt, w) in m.items():
        if dt != "U32":
            continue
        base = name[: -len(".weight")]
        src = "model.language_model." + base[len("model."):] if base.startswith("model.") else base
        if ".switch_mlp." in base:
            layer, proj = base.split(".mlp.switch_mlp.")
            src_name = "model.language_model." + layer[len("model."):] + ".mlp.experts."
            if proj == "down_proj":
                x = mq.bf16_bits_to_f32(h[src_name + "down_proj"][1])
            else:
                gu = mq.bf16_bits_to_f32(h[src_name + "gate_up_proj"][1])
                i = gu.shape[1] // 2
                x = gu[:, :i] if proj == "gate_proj" else gu[:, i:]
            group = 64
        else:
            x = mq.bf16_bits_to_f32(h[src + ".weight"][1])
            group = 32 if "ngram_embedding" in base else 64
        r = mq.quantize(x, group, 4, "gpu")
        assert np.array_equal(r["weight"], w), name
        assert np.array_equal(r["scales"], m[base + ".scales"][1]), name
        assert np.array_equal(r["biases"], m[base + ".biases"][1]), name
        checked += 1
    assert checked > 20
    mx = _mlx()
    if mx is None:
        return
    # MLX itself dequantizes the stored bytes to what the fixture generator used
    for name, (dt, w) in m.items():
        if dt != "U32":
            continue
        base = name[: -len(".weight")]
        group = 32 if "ngram_embedding" in base else 64
        s, b = m[base + ".scales"][1], m[base + ".biases"][1]
        deq = mx.dequantize(
            mx.array(w), mx.array(mq.bf16_bits_to_f32(s)).astype(mx.bfloat16), mx.array(mq.bf16_bits_to_f32(b)).astype(mx.bfloat16),
            group_size=group, bits=4,
        )
        ours = mq.dequantize(mq.unpack(w, 4, w.shape[-1] * 8), s, b, group)
        assert np.abs(np.array(deq.astype(mx.float32)) - mq.round_bf16(ours)).max() <= np.abs(ours).max() * 2 ** -7, name
