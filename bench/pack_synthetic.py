#!/usr/bin/env python3
"""Writes a synthetic qwen4_exp BF16 checkpoint with realistic expert shapes for packing benchmarks.

The tensor inventory is tools/make_tiny_checkpoint.py's, with hidden_size 2560 and
moe_intermediate_size 640 (the FN expert shapes) and a chosen number of layers and experts. The
file is written tensor by tensor from a tiled random block, so memory stays small whatever the size.

    bench/pack_synthetic.py OUT_DIR [--layers 8] [--experts 48] [--hidden 2560] [--intermediate 640]

Then: bench/pack_bench.sh OUT_DIR runs `cherenkov prepare` on it and reports MB/s and peak RSS.
"""
import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import make_tiny_checkpoint as tiny  # noqa: E402


class ShapeRecorder(tiny.Tensors):
    """Records names, dtypes and shapes; data is produced when the file is written."""

    def bf16(self, name, shape, scale=0.05, mean=0.0):
        self.items[name] = ("BF16", list(shape), (scale, mean))

    def f32(self, name, values):
        array = np.asarray(values, dtype=np.float32)
        self.items[name] = ("F32", list(array.shape), array.tobytes())

    def i64(self, name, values):
        array = np.asarray(values, dtype=np.int64)
        self.items[name] = ("I64", list(array.shape), array.tobytes())


def bf16_block(rng, n_values):
    values = rng.standard_normal(n_values).astype(np.float32)
    bits = values.view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_checkpoint(out_dir, cfg, items):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    sizes = {}
    for name in sorted(items):
        dtype, shape, payload = items[name]
        n = int(np.prod(shape)) if shape else 1
        size = n * 2 if dtype == "BF16" else len(payload)
        sizes[name] = size
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    block = bf16_block(rng, 1 << 22)  # 8 MiB of random bf16, tiled
    path = os.path.join(out_dir, "model.safetensors")
    with open(path + ".tmp", "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for name in sorted(items):
            dtype, shape, payload = items[name]
            if dtype != "BF16":
                out.write(payload)
                continue
            scale, mean = payload
            scaled = ((block.astype(np.uint32) << 16).view(np.float32) * scale + mean).astype(np.float32)
            bits = scaled.view(np.uint32)
            data = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
            remaining = sizes[name]
            while remaining > 0:
                chunk = data[: min(remaining, len(data))]
                out.write(chunk)
                remaining -= len(chunk)
    os.replace(path + ".tmp", path)
    config = dict(cfg, architectures=["Qwen4ExpForCausalLM"], model_type="qwen4_exp_text")
    with open(os.path.join(out_dir, "config.json"), "w") as out:
        json.dump(config, out, indent=2)
    return offset


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--experts", type=int, default=48)
    parser.add_argument("--hidden", type=int, default=2560)
    parser.add_argument("--intermediate", type=int, default=640)
    args = parser.parse_args()
    cfg = dict(tiny.TINY_TEXT_CONFIG)
    cfg["hidden_size"] = args.hidden
    cfg["moe_intermediate_size"] = args.intermediate
    cfg["num_experts"] = args.experts
    cfg["num_hidden_layers"] = args.layers
    cfg["layer_types"] = [("qwen_sparse_attention" if (layer + 1) % 4 == 0 else "linear_attention")
                          for layer in range(args.layers)]
    recorder = ShapeRecorder(0)
    original = tiny.Tensors
    tiny.Tensors = lambda seed: recorder  # build() records shapes only
    try:
        items = tiny.build(cfg, "flat", "fused", False, 0)
    finally:
        tiny.Tensors = original
    os.makedirs(args.out_dir, exist_ok=True)
    total = write_checkpoint(args.out_dir, cfg, items)
    print(f"{args.out_dir}: {total / 1e9:.2f} GB of tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
