#!/usr/bin/env python3
"""Writes a synthetic qwen4_exp checkpoint in mlx-lm 4-bit form with realistic (FN-like) shapes,
for engine benchmarks.

    bench/synthetic_store.py OUT_DIR [--layers 4] [--experts 512] [--top-k 10] [--hidden 2560]
                                     [--intermediate 640] [--vocab 32768] [--mtp] [--bf16] ...

With --bf16 it writes the Hugging Face BF16 form instead (flat `model.` prefix, fused
`mlp.experts.gate_up_proj` / `down_proj`, n-gram table in `shard_J` parts, int64 PLE buffers,
`full_attention` spelling of the QSA layers), the checkpoint a peer engine's converter and
`cherenkov prepare` both read, for side-by-side benchmarks (bench/peers/). Its weights are seeded
normal draws with the fixture initializer's standard deviations, drawn on a CUDA device when
PyTorch has one (fast), else with numpy. `--tokenizer DIR` copies the tokenizer files of DIR.

The layout is the one of tests/fixtures/tiny_c/mlx_q4 (docs/formats.md §3.5, §3.9):
prefix `model.`, experts stacked as `mlp.switch_mlp.{gate,up,down}_proj`, conv1d weights
`[C, K, 1]`, n-gram shards quantized with group 32, routers, norms, convs, `A_log` and `dt_bias`
in BF16, every other Linear / Embedding weight affine 4-bit group 64 (U32 codes, BF16 scales and
biases), `config.json` = nested source config + `quantization` / `quantization_config`. Unlike a
real mlx-lm conversion, `--mtp` keeps an MTP layer (quantized like the trunk).

The tensor inventory, the non-quantized weights, the n-gram buffers and config.json come from
tools/fixtures (spec.py, writers.py); the config is FN's (docs/qwen4_exp.md §1.2) except
for the dimensions given on the command line and a small n-gram table. Quantized tensors are not
quantized from float weights: their codes are uniform random 4-bit values and their scales and
biases are drawn per group so that the dequantized weights have the standard deviation the fixture
initializer would give (1/sqrt(fan_in) for Linears and experts, 1 for the embedding and n-gram
table, 3/sqrt(H) for lm_head), with random sign as MLX's GPU quantizer produces. Everything is
generated and written blockwise, so memory stays small whatever the size. No tokenizer is written
(`cherenkov bench` draws random token ids). Deterministic for a given set of flags.

With the defaults (4 layers: 3 Gated DeltaNet + 1 QSA, 512 experts of H 2560 / I 640) the routed
experts are 4 x 512 x 2,764,800 B = 5.66 GB, about 6.3 GB in all.
"""
import argparse
import hashlib
import math
import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from fixtures import mlx_quant as mq  # noqa: E402
from fixtures import spec, writers  # noqa: E402

CONFIG_NAME = "synthetic"
BLOCK_WORDS = 1 << 22  # uint32 code words generated per block (16 MiB)
BLOCK_GROUPS = 1 << 21  # scale/bias groups generated per block
SIGN_STD = 4.6098  # std of (q - 7.5) for q uniform in 0..15: sqrt((16^2 - 1) / 12)


# ----------------------------------------------------------------------------- config


def mrope_section(rotary_dim):
    half = rotary_dim // 2
    section = [half // 3] * 3
    for i in range(half - sum(section)):
        section[i] += 1
    return section


def text_config(args):
    layers = args.layers
    types = ["qwen_sparse_attention" if (i + 1) % args.qsa_every == 0 else "linear_attention" for i in range(layers)]
    if layers >= 2 and "qwen_sparse_attention" not in types:
        types[-1] = "qwen_sparse_attention"
    ple_layer = args.ple_layer
    if ple_layer is None:  # FN: one-indexed layer 2, or the first GDN layer when that one is QSA
        gdn = [i + 1 for i, t in enumerate(types) if t == "linear_attention"]
        ple_layer = 2 if 2 in gdn else (gdn[0] if gdn else 0)
    if ple_layer and types[ple_layer - 1] != "linear_attention":
        raise SystemExit(f"--ple-layer {ple_layer} is not a linear-attention layer ({types})")
    rotary = int(args.head_dim * 0.25)
    return {
        "vocab_size": args.vocab,
        "hidden_size": args.hidden,
        "num_hidden_layers": layers,
        "layer_types": types,
        "num_attention_heads": args.attn_heads,
        "num_key_value_heads": args.kv_heads,
        "head_dim": args.head_dim,
        "rope_parameters": {"rope_type": "default", "mrope_interleaved": True, "rope_theta": 10000000.0,
                            "partial_rotary_factor": 0.25, "mrope_section": mrope_section(rotary)},
        "max_position_embeddings": 262144,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": args.gdn_head_dim,
        "linear_value_head_dim": args.gdn_head_dim,
        "linear_num_key_heads": args.gdn_k_heads,
        "linear_num_value_heads": args.gdn_v_heads,
        "output_gate_type": "sigmoid",
        "num_experts": args.experts,
        "num_experts_per_tok": args.top_k,
        "moe_intermediate_size": args.intermediate,
        "shared_expert_intermediate_size": args.shared_intermediate or args.intermediate,
        "norm_topk_prob": True,
        "hc_count": args.hc_count,
        "hc_lowrank": args.hc_lowrank,
        "ple_layer_ids": [ple_layer] if ple_layer else [],
        "ple_embed_dim": args.ple_dim or args.hidden,
        "ple_conv_kernel_size": 4,
        "ngram_size": 3,
        "heads_per_ngram": 8,
        "ngram_vocab_size_base": args.ngram_base,
        "make_ngram_vocab_size_divisible_by": 128,
        "split_ngram_parts": args.ngram_parts,
        "indexer_n_heads": 4,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 128,
        "indexer_budget": 2048,
        "indexer_compress_ratio": 4,
        "eos_token_id": 2,
        "mtp_num_hidden_layers": 1,  # as FN; without --mtp the packer disables it (like mlx-lm drops mtp.*)
        "mtp_use_dedicated_embeddings": False,
    }


# ----------------------------------------------------------------------------- data producers


def seed_of(args, name):
    digest = hashlib.sha256(f"cherenkov-synthetic/{args.seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def code_words(seed, n_words):
    """Uniform random 4-bit codes, 8 per little-endian uint32 word, in blocks."""
    rng = np.random.Generator(np.random.SFC64(seed))
    done = 0
    while done < n_words:
        n = min(BLOCK_WORDS, n_words - done)
        yield rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
        done += n


def group_table(seed, sigma):
    """65536 (scale, bias) pairs as BF16 bits: |scale| = sigma / SIGN_STD * lognormal(0, 0.15),
    bias = -7.5 * scale + N(0, 0.1 sigma), scale negative for half of them (MLX's GPU quantizer
    stores bias = max and a negative scale when |max| >= |min|)."""
    rng = np.random.default_rng(seed)
    n = 1 << 16
    scale = (sigma / SIGN_STD) * np.exp(0.15 * rng.standard_normal(n))
    scale = np.where(rng.random(n) < 0.5, -scale, scale).astype(np.float32)
    bias = (-7.5 * scale + 0.1 * sigma * rng.standard_normal(n)).astype(np.float32)
    return mq.f32_to_bf16_bits(scale), mq.f32_to_bf16_bits(bias)


def group_params(seed, n_groups, sigma, which):
    """BF16 scales (which=0) or biases (which=1) of n_groups groups: pairs drawn from
    group_table, with the same draws for both, so each group's scale and bias belong together."""
    table = group_table(seed, sigma)[which]
    rng = np.random.Generator(np.random.SFC64(seed))
    done = 0
    while done < n_groups:
        n = min(BLOCK_GROUPS, n_groups - done)
        yield table[rng.integers(0, 1 << 16, size=n, dtype=np.uint16)]
        done += n


def constant(array):
    def produce():
        yield np.ascontiguousarray(array)
    return produce


class Checkpoint:
    """Tensors by name: (dtype, shape, producer of contiguous little-endian blocks)."""

    def __init__(self, args):
        self.args = args
        self.tensors = {}
        self.quant = {"group_size": 64, "bits": 4, "mode": "affine"}

    def add(self, name, dtype, shape, produce):
        assert name not in self.tensors, name
        self.tensors[name] = (dtype, [int(x) for x in shape], produce)

    def add_quantized(self, base, shape, sigma, group, override=False):
        *lead, rows, cols = shape
        if cols % group or (cols * 4) % 32:
            raise SystemExit(f"{base}: last dim {cols} is not a multiple of group size {group}")
        words = int(np.prod(lead, dtype=np.int64)) * rows * cols // 8
        groups = int(np.prod(lead, dtype=np.int64)) * rows * cols // group
        seed = seed_of(self.args, base)
        self.add(base + ".weight", "U32", [*lead, rows, cols // 8], lambda: code_words(seed, words))
        self.add(base + ".scales", "BF16", [*lead, rows, cols // group], lambda: group_params(seed + 1, groups, sigma, 0))
        self.add(base + ".biases", "BF16", [*lead, rows, cols // group], lambda: group_params(seed + 1, groups, sigma, 1))
        if override:
            self.quant[base] = {"group_size": group, "bits": 4}


def normal_bf16(seed, count, sigma):
    """`count` BF16 bit patterns of N(0, sigma^2), in blocks."""
    try:
        import torch
        device = "cuda" if torch.cuda.is_available() else None
    except ImportError:
        device = None
    done = 0
    if device:
        gen = torch.Generator(device=device).manual_seed(seed & ((1 << 63) - 1))
        while done < count:
            n = min(BLOCK_WORDS * 8, count - done)
            block = torch.randn(n, generator=gen, device=device, dtype=torch.float32) * sigma
            yield block.to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16)
            done += n
        return
    rng = np.random.Generator(np.random.SFC64(seed))
    while done < count:
        n = min(BLOCK_WORDS, count - done)
        yield mq.f32_to_bf16_bits(rng.standard_normal(n, dtype=np.float32) * np.float32(sigma))
        done += n


def sigma_of(kind, shape):
    """The weight std of tools/fixtures/spec.py init_tensor for the quantized kinds."""
    if kind in ("embed", "ngram"):
        return 1.0
    if kind == "head":
        return 3.0 / math.sqrt(shape[-1])
    return 1.0 / math.sqrt(shape[-1])  # linear, expert


def build_bf16(args):
    """The Hugging Face BF16 form (flat prefix, fused experts); see the module docstring."""
    text = text_config(args)
    text["layer_types"] = ["full_attention" if t == "qwen_sparse_attention" else t for t in text["layer_types"]]
    spec.CONFIGS[CONFIG_NAME] = {"text": text, "mtp": args.mtp, "forms": ["hf_flat_fused"]}
    d = spec.Dims(spec.text_config(CONFIG_NAME))
    ckpt = Checkpoint(args)

    def add_normal(name, shape, sigma):
        seed = seed_of(args, name)
        count = int(np.prod(shape, dtype=np.int64))
        ckpt.add(name, "BF16", shape, lambda: normal_bf16(seed, count, sigma))

    for name, shape, kind in spec.inventory(CONFIG_NAME):
        if kind == "ngram":
            base = name[: -len("weight")]
            for j, rows in enumerate(spec.ngram_shard_rows(shape[0], d.t["split_ngram_parts"])):
                add_normal(f"{base}shard_{j}.weight", (rows, shape[1]), sigma_of(kind, shape))
        elif kind in spec.QUANT_KINDS:
            add_normal(name, shape, sigma_of(kind, shape))
        elif kind == "router":
            add_normal(name, shape, 8.0 / math.sqrt(shape[-1]))  # as the fixtures: few near-ties
        else:
            w = spec.init_tensor(CONFIG_NAME, name, shape, kind, d)
            if kind == "buffer":
                ckpt.add(name, "I64", w.shape, constant(w.astype("<i8")))
            else:
                ckpt.add(name, "BF16", w.shape, constant(mq.f32_to_bf16_bits(w)))
    return ckpt, None


def build(args):
    if args.bf16:
        return build_bf16(args)
    text = text_config(args)
    spec.CONFIGS[CONFIG_NAME] = {"text": text, "mtp": args.mtp, "forms": ["mlx_q4"]}
    d = spec.Dims(spec.text_config(CONFIG_NAME))
    ckpt = Checkpoint(args)
    for name, shape, kind in spec.inventory(CONFIG_NAME):
        if kind == "expert":  # fused [E, 2I, H] / [E, H, I] -> switch_mlp (docs/formats.md 3.5)
            base = name.rsplit(".experts.", 1)[0] + ".switch_mlp."
            if name.endswith("gate_up_proj"):
                for proj in ("gate_proj", "up_proj"):
                    ckpt.add_quantized(base + proj, (d.E, d.I, d.H), sigma_of(kind, shape), 64)
            else:
                ckpt.add_quantized(base + "down_proj", shape, sigma_of(kind, shape), 64)
        elif kind == "ngram":  # one table -> torch.chunk shards, group 32 overrides
            base = name[: -len("weight")]
            for j, rows in enumerate(spec.ngram_shard_rows(shape[0], d.t["split_ngram_parts"])):
                ckpt.add_quantized(f"{base}shard_{j}", (rows, shape[1]), sigma_of(kind, shape), 32, override=True)
        elif kind in spec.QUANT_KINDS:
            ckpt.add_quantized(name[: -len(".weight")], shape, sigma_of(kind, shape), 64)
        else:  # small float tensors and int64 buffers: the fixture initializer, stored as mlx-lm does
            w = spec.init_tensor(CONFIG_NAME, name, shape, kind, d)
            if kind == "buffer":
                ckpt.add(name, "I64", w.shape, constant(w.astype("<i8")))
                continue
            if kind in ("conv", "pleconv"):
                w = np.ascontiguousarray(np.transpose(w, (0, 2, 1)))  # [C, 1, K] -> [C, K, 1]
            ckpt.add(name, "BF16", w.shape, constant(mq.f32_to_bf16_bits(w)))
    return ckpt, ckpt.quant


# ----------------------------------------------------------------------------- writing

_SIZE = {"U32": 4, "BF16": 2, "I64": 8, "F32": 4}


def nbytes(dtype, shape):
    return int(np.prod(shape, dtype=np.int64)) * _SIZE[dtype]


def plan_shards(tensors, shard_bytes):
    """Sorted names split greedily into files of about shard_bytes (mlx-lm's 5 GB default)."""
    shards, current, size = [], [], 0
    for name in sorted(tensors):
        n = nbytes(*tensors[name][:2])
        if current and size + n > shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(name)
        size += n
    shards.append(current)
    if len(shards) == 1:
        return {"model.safetensors": shards[0]}
    return {f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors": names for i, names in enumerate(shards)}


def write_file(path, tensors, names, progress, file_format="mlx"):
    import json
    import struct

    header, offset = {"__metadata__": {"format": file_format}}, 0
    for name in names:
        dtype, shape, _ = tensors[name]
        n = nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for name in names:
            dtype, shape, produce = tensors[name]
            want, wrote = nbytes(dtype, shape), 0
            for block in produce():
                data = memoryview(np.ascontiguousarray(block)).cast("B")
                out.write(data)
                wrote += len(data)
                progress(len(data))
            if wrote != want:
                raise AssertionError(f"{name}: wrote {wrote} bytes, expected {want}")
    os.replace(path + ".tmp", path)
    return offset


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=4, help="trunk layers (default 4: 3 GDN + 1 QSA)")
    parser.add_argument("--experts", type=int, default=512)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=2560)
    parser.add_argument("--intermediate", type=int, default=640, help="moe_intermediate_size")
    parser.add_argument("--shared-intermediate", type=int, default=0, help="default: --intermediate")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--attn-heads", type=int, default=24)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=256)
    parser.add_argument("--gdn-k-heads", type=int, default=16)
    parser.add_argument("--gdn-v-heads", type=int, default=48)
    parser.add_argument("--gdn-head-dim", type=int, default=128)
    parser.add_argument("--hc-count", type=int, default=4)
    parser.add_argument("--hc-lowrank", type=int, default=320)
    parser.add_argument("--qsa-every", type=int, default=4, help="QSA at layers i with (i+1) %% N == 0")
    parser.add_argument("--ple-layer", type=int, default=None, help="one-indexed PLE layer, 0 for none (default 2)")
    parser.add_argument("--ple-dim", type=int, default=0, help="ple_embed_dim (default: --hidden)")
    parser.add_argument("--ngram-base", type=int, default=200_000, help="ngram_vocab_size_base (FN: 2e7)")
    parser.add_argument("--ngram-parts", type=int, default=16, help="split_ngram_parts")
    parser.add_argument("--mtp", action="store_true", help="add one MTP layer (mtp.*)")
    parser.add_argument("--bf16", action="store_true", help="the Hugging Face BF16 form (module docstring)")
    parser.add_argument("--tokenizer", default="", help="--bf16: copy this folder's tokenizer files")
    parser.add_argument("--shard-gb", type=float, default=5.0, help="safetensors file size (default 5, as mlx-lm)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dry-run", action="store_true", help="print the sizes only")
    args = parser.parse_args()

    ckpt, quant = build(args)
    tensors = ckpt.tensors
    total = sum(nbytes(dt, shape) for dt, shape, _ in tensors.values())
    experts = sum(nbytes(dt, shape) for name, (dt, shape, _) in tensors.items()
                  if ".switch_mlp." in name or ".mlp.experts." in name)
    ngram = sum(nbytes(dt, shape) for name, (dt, shape, _) in tensors.items() if ".ngram_embedding." in name)
    print(f"{args.out_dir}: {len(tensors)} tensors, {total / 1e9:.2f} GB (experts {experts / 1e9:.2f}, "
          f"n-gram {ngram / 1e9:.2f}, other {(total - experts - ngram) / 1e9:.2f})", flush=True)
    if args.dry_run:
        return 0

    os.makedirs(args.out_dir, exist_ok=True)
    files = plan_shards(tensors, int(args.shard_gb * 1e9))
    start, state = time.monotonic(), {"done": 0, "shown": 0}

    def progress(n):
        state["done"] += n
        if sys.stderr.isatty() and state["done"] - state["shown"] >= 256 << 20:
            state["shown"] = state["done"]
            sys.stderr.write(f"\r{state['done'] / 1e9:.2f} / {total / 1e9:.2f} GB")
            sys.stderr.flush()

    for file_name, names in files.items():
        write_file(os.path.join(args.out_dir, file_name), tensors, names, progress, "pt" if args.bf16 else "mlx")
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    shapes = {name: (dt, SimpleNamespace(shape=tuple(shape))) for name, (dt, shape, _) in tensors.items()}
    metadata = {"total_size": total}
    if quant is not None:
        metadata["total_parameters"] = writers.mlx_total_parameters(shapes, quant)
    weight_map = {name: f for f, names in files.items() for name in names}
    writers.write_json(os.path.join(args.out_dir, "model.safetensors.index.json"),
                       {"metadata": metadata, "weight_map": dict(sorted(weight_map.items()))}, sort_keys=False)
    config = (writers.hf_config(CONFIG_NAME, nested=False, transformers_version=None) if quant is None
              else writers.mlx_config(CONFIG_NAME, quant, None))
    writers.write_json(os.path.join(os.path.abspath(args.out_dir), "config.json"), config)
    if args.tokenizer:
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
            if os.path.isfile(os.path.join(args.tokenizer, name)):
                shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out_dir, name))
    seconds = time.monotonic() - start
    print(f"wrote {len(files)} file(s) in {seconds:.1f} s ({total / 1e6 / max(seconds, 1e-9):.0f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
