#!/usr/bin/env python3
"""Writes a tiny random qwen4_exp checkpoint in Hugging Face BF16 form.

It follows the tensor inventory of docs/qwen4_exp.md section 2 (and 6.2 for MTP) with the
tiny config of section 7, widened so that every dimension the packer quantizes along is a
multiple of 64 (n-gram rows: 32). The weights are random: the checkpoint exercises loading,
inspection and packing, not numerics (tests/fixtures hold the transformers references).

    tools/make_tiny_checkpoint.py OUT_DIR [--form flat|nested] [--experts fused|per-expert]
                                          [--mtp] [--shards N] [--seed S]

Deterministic for a given set of flags. Needs only numpy.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

TINY_TEXT_CONFIG = {
    "vocab_size": 256,
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [2, 1, 1], "mrope_interleaved": True},
    "attention_bias": False,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
    "norm_topk_prob": True,
    "layer_types": ["linear_attention", "linear_attention", "qwen_sparse_attention", "qwen_sparse_attention"],
    "eos_token_id": 2,
    "hc_count": 4,
    "hc_lowrank": 64,
    "ple_layer_ids": [2],
    "ple_embed_dim": 128,
    "ple_conv_kernel_size": 4,
    "ngram_size": 3,
    "heads_per_ngram": 2,
    "ngram_vocab_size_base": 101,
    "make_ngram_vocab_size_divisible_by": 8,
    "split_ngram_parts": 3,
    "indexer_n_heads": 2,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 16,
    "indexer_budget": 8,
    "indexer_compress_ratio": 4,
    "output_gate_type": "sigmoid",
    "max_position_embeddings": 4096,
}

GAMMA, M1, M2, PRIME_1 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 10007
MASK64 = (1 << 64) - 1


def splitmix64(v):
    v = (v + GAMMA) & MASK64
    v = ((v ^ (v >> 30)) * M1) & MASK64
    v = ((v ^ (v >> 27)) * M2) & MASK64
    return v ^ (v >> 31)


def is_prime(n):
    if n < 2:
        return False
    for p in range(2, int(math.isqrt(n)) + 1):
        if n % p == 0:
            return False
    return True


def hash_buffers(cfg, ple_layer_index):
    """docs/qwen4_exp.md section 3.4: multipliers, head vocab sizes, offsets."""
    n, hpn = cfg["ngram_size"], cfg["heads_per_ngram"]
    n_heads = (n - 1) * hpn
    mmax = (2**63 - 1) // max(cfg["vocab_size"], 1)
    hb = max(1, mmax // 2)
    base = 1234 + PRIME_1 * ple_layer_index
    multipliers = [2 * (splitmix64((base + GAMMA * (j + 1)) & MASK64) % hb) + 1 for j in range(n)]
    sizes, candidate, wanted = [], cfg["ngram_vocab_size_base"], (ple_layer_index + 1) * n_heads
    primes = []
    while len(primes) < wanted:
        if is_prime(candidate):
            primes.append(candidate)
        candidate += 1
    sizes = primes[ple_layer_index * n_heads:]
    offsets = [sum(sizes[:h]) for h in range(n_heads)]
    return multipliers, sizes, offsets


class Tensors:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.items = {}

    def bf16(self, name, shape, scale=0.05, mean=0.0):
        values = (self.rng.standard_normal(shape) * scale + mean).astype(np.float32)
        bits = values.view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        self.items[name] = ("BF16", list(shape), rounded.tobytes())

    def f32(self, name, values):
        array = np.asarray(values, dtype=np.float32)
        self.items[name] = ("F32", list(array.shape), array.tobytes())

    def i64(self, name, values):
        array = np.asarray(values, dtype=np.int64)
        self.items[name] = ("I64", list(array.shape), array.tobytes())


def add_hyper_connection(t, prefix, c, h, r, inject=True):
    t.bf16(prefix + "hc_norm.weight", (c * h,), 0.1)
    t.bf16(prefix + "input_mix_weight_down.weight", (r, c * h))
    t.bf16(prefix + "input_mix_weight_up.weight", (c * h, r))
    if inject:
        t.bf16(prefix + "block_inject_weight.weight", (c, c * h))


def add_moe(t, prefix, cfg, experts):
    h, e, i, i_s = cfg["hidden_size"], cfg["num_experts"], cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
    t.bf16(prefix + "gate.weight", (e, h), 0.5)
    if experts == "fused":
        t.bf16(prefix + "experts.gate_up_proj", (e, 2 * i, h))
        t.bf16(prefix + "experts.down_proj", (e, h, i))
    else:
        for expert in range(e):
            t.bf16(f"{prefix}experts.{expert}.gate_proj.weight", (i, h))
            t.bf16(f"{prefix}experts.{expert}.up_proj.weight", (i, h))
            t.bf16(f"{prefix}experts.{expert}.down_proj.weight", (h, i))
    t.bf16(prefix + "shared_expert.gate_proj.weight", (i_s, h))
    t.bf16(prefix + "shared_expert.up_proj.weight", (i_s, h))
    t.bf16(prefix + "shared_expert.down_proj.weight", (h, i_s))
    t.bf16(prefix + "shared_expert_gate.weight", (1, h))


def add_attention(t, prefix, cfg):
    h, nh, nkv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    ni, di = cfg["indexer_n_heads"], cfg["indexer_head_dim"]
    t.bf16(prefix + "q_proj.weight", (nh * 2 * d, h))
    t.bf16(prefix + "k_proj.weight", (nkv * d, h))
    t.bf16(prefix + "v_proj.weight", (nkv * d, h))
    t.bf16(prefix + "o_proj.weight", (h, nh * d))
    t.bf16(prefix + "q_norm.weight", (d,), 0.1)
    t.bf16(prefix + "k_norm.weight", (d,), 0.1)
    t.bf16(prefix + "indexer.index_qk_proj.weight", ((ni + 1) * di, h))
    t.bf16(prefix + "indexer.q_layernorm.weight", (di,), 0.1)
    t.bf16(prefix + "indexer.k_layernorm.weight", (di,), 0.1)


def add_linear_attention(t, prefix, cfg):
    h, hk, hv = cfg["hidden_size"], cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, kc = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"]
    conv_dim = 2 * hk * dk + hv * dv
    t.bf16(prefix + "in_proj_qkv.weight", (conv_dim, h))
    t.bf16(prefix + "in_proj_z.weight", (hv * dv, h))
    t.bf16(prefix + "in_proj_b.weight", (hv, h))
    t.bf16(prefix + "in_proj_a.weight", (hv, h))
    t.bf16(prefix + "conv1d.weight", (conv_dim, 1, kc), 0.3)
    t.bf16(prefix + "dt_bias", (hv,), 0.5)
    t.f32(prefix + "A_log", np.log(np.linspace(1.0, 8.0, hv)))
    t.bf16(prefix + "norm.weight", (dv,), 0.1, 1.0)
    t.bf16(prefix + "out_proj.weight", (h, hv * dv))


def add_ple(t, prefix, cfg, ple_layer_index):
    c, h, p = cfg["hc_count"], cfg["hidden_size"], cfg["ple_embed_dim"]
    n_heads = (cfg["ngram_size"] - 1) * cfg["heads_per_ngram"]
    t.bf16(prefix + "key_proj.weight", (c * h, p))
    t.bf16(prefix + "value_proj.weight", (h, p))
    for norm in ("norm_key", "norm_query", "norm_conv"):
        t.bf16(f"{prefix}{norm}.weight", (c * h,), 0.1)
    t.bf16(prefix + "conv1d.weight", (c * h, 1, cfg["ple_conv_kernel_size"]), 0.2)
    multipliers, sizes, offsets = hash_buffers(cfg, ple_layer_index)
    div = cfg["make_ngram_vocab_size_divisible_by"]
    padded = -(-sum(sizes) // div) * div
    parts = cfg["split_ngram_parts"]
    rows_per_shard = -(-padded // parts)  # torch.chunk sizes
    start = 0
    for shard in range(parts):
        rows = min(rows_per_shard, padded - start)
        if rows <= 0:
            break
        t.bf16(f"{prefix}ple_embedding.ngram_embedding.shard_{shard}.weight", (rows, p // n_heads), 0.5)
        start += rows
    t.i64(prefix + "ple_embedding.layer_multipliers", multipliers)
    t.i64(prefix + "ple_embedding.ngram_heads_vocab_sizes", sizes)
    t.i64(prefix + "ple_embedding.ngram_heads_offsets", offsets)


def build(cfg, form, experts, mtp, seed):
    t = Tensors(seed)
    m = "model.language_model." if form == "nested" else "model."
    c, h, r, v = cfg["hc_count"], cfg["hidden_size"], cfg["hc_lowrank"], cfg["vocab_size"]
    t.bf16(m + "embed_tokens.weight", (v, h), 0.5)
    t.bf16("lm_head.weight", (v, h), 0.2)
    add_hyper_connection(t, m + "hyper_connection_mixer.", c, h, r, inject=False)
    ple_ids = sorted(set(cfg["ple_layer_ids"]))
    for layer, layer_type in enumerate(cfg["layer_types"]):
        prefix = f"{m}layers.{layer}."
        add_hyper_connection(t, prefix + "attn_hyper_connection.", c, h, r)
        add_hyper_connection(t, prefix + "mlp_hyper_connection.", c, h, r)
        if layer_type == "linear_attention":
            add_linear_attention(t, prefix + "linear_attn.", cfg)
        else:
            add_attention(t, prefix + "self_attn.", cfg)
        add_moe(t, prefix + "mlp.", cfg, experts)
        if layer + 1 in ple_ids:
            add_ple(t, prefix + "ple.", cfg, ple_ids.index(layer + 1))
    if mtp:
        t.bf16("mtp.pre_fc_norm_embedding.weight", (h,), 0.1)
        t.bf16("mtp.pre_fc_norm_hidden.weight", (c * h,), 0.1)
        t.bf16("mtp.fc_embedding.weight", (h, h))
        t.bf16("mtp.fc_hidden.weight", (h, h))
        prefix = "mtp.layers.0."
        add_hyper_connection(t, prefix + "attn_hyper_connection.", c, h, r)
        add_hyper_connection(t, prefix + "mlp_hyper_connection.", c, h, r)
        add_attention(t, prefix + "self_attn.", cfg)
        add_moe(t, prefix + "mlp.", cfg, experts)
        add_hyper_connection(t, "mtp.hyper_connection_mixer.", c, h, r, inject=False)
    return t.items


def safetensors_bytes(items):
    """The layout the Rust safetensors writer uses: sorted names, header padded to 8 bytes."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name in sorted(items):
        dtype, shape, raw = items[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def write_atomically(path, payload):
    temp = path + ".tmp"
    with open(temp, "wb") as out:
        out.write(payload)
    os.replace(temp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--form", choices=["flat", "nested"], default="flat")
    parser.add_argument("--experts", choices=["fused", "per-expert"], default="fused")
    parser.add_argument("--mtp", action="store_true")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cfg = dict(TINY_TEXT_CONFIG)
    if args.mtp:
        cfg["mtp_num_hidden_layers"] = 1
    items = build(cfg, args.form, args.experts, args.mtp, args.seed)
    os.makedirs(args.out_dir, exist_ok=True)

    if args.form == "nested":
        text_config = dict(cfg, model_type="qwen4_exp_text")
        text_config["layer_types"] = ["full_attention" if t == "qwen_sparse_attention" else t for t in cfg["layer_types"]]
        config = {"architectures": ["Qwen4ExpForConditionalGeneration"], "model_type": "qwen4_exp",
                  "tie_word_embeddings": False, "text_config": text_config}
    else:
        config = dict(cfg, architectures=["Qwen4ExpForCausalLM"], model_type="qwen4_exp_text")
    write_atomically(os.path.join(args.out_dir, "config.json"), (json.dumps(config, indent=2) + "\n").encode())

    names = sorted(items)
    if args.shards <= 1:
        write_atomically(os.path.join(args.out_dir, "model.safetensors"), safetensors_bytes(items))
        return 0
    per_shard = -(-len(names) // args.shards)
    weight_map, total = {}, 0
    for shard in range(args.shards):
        chunk = names[shard * per_shard:(shard + 1) * per_shard]
        file_name = f"model-{shard + 1:05d}-of-{args.shards:05d}.safetensors"
        write_atomically(os.path.join(args.out_dir, file_name), safetensors_bytes({n: items[n] for n in chunk}))
        for name in chunk:
            weight_map[name] = file_name
            total += len(items[name][2])
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    write_atomically(os.path.join(args.out_dir, "model.safetensors.index.json"), (json.dumps(index, indent=2) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
