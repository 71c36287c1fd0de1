"""Trained weights -> the MLX 4-bit checkpoint (mlx-lm qwen4_exp layout, docs/formats.md 2, 3.5, 3.9)
plus the MTP head, with the fixtures' quantizer and writers (tools/fixtures)."""

from __future__ import annotations

import json
import math
import os

import numpy as np

from fixtures import mlx_quant as mq
from fixtures import spec, writers

SHARD_LIMIT = 7_500_000  # bytes per tensor file


def master_from_state(spec_key: str, trunk_sd: dict, mtp_sd: dict) -> dict:
    """canonical name -> (kind, float32 array rounded to bf16 | int64 buffer), spec.inventory order."""
    src = {k: v for k, v in trunk_sd.items()}
    src.update({"mtp." + k: v for k, v in mtp_sd.items()})
    out = {}
    for name, shape, kind in spec.inventory(spec_key):
        if name not in src:
            raise KeyError(f"trained state has no {name}")
        t = src[name].detach().to("cpu")
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name}: {tuple(t.shape)} != {shape}")
        if kind == "buffer":
            out[name] = (kind, t.numpy().astype(np.int64))
        else:
            out[name] = (kind, mq.round_bf16(t.float().numpy().astype(np.float32)))
    extra = sorted(set(src) - set(out))
    extra = [e for e in extra if not e.endswith("rotary_emb.inv_freq")]
    if extra:
        raise KeyError(f"state tensors outside the inventory: {extra[:8]}")
    return out


def mlx_tensors_with_mtp(spec_key: str, master: dict, quantized: dict):
    """writers.mlx_tensors (trunk; it drops mtp.* like mlx-lm) plus the MTP head in the same layout:
    quantized modules as weight/scales/biases, experts as switch_mlp, everything else BF16."""
    tensors, quant = writers.mlx_tensors(spec_key, master, quantized)
    d = spec.Dims(spec.text_config(spec_key))

    def put_q(base, r, rows=None):
        sl = slice(None) if rows is None else rows
        for comp in ("weight", "scales", "biases"):
            a = r[comp]
            a = a[..., sl, :] if a.ndim == 3 else a[sl]
            tensors[f"{base}.{comp}"] = ("U32" if comp == "weight" else "BF16", np.ascontiguousarray(a))

    for name, (kind, w) in master.items():
        if not name.startswith("mtp."):
            continue
        if kind == "expert":
            base = name.rsplit(".experts.", 1)[0] + ".switch_mlp."
            r = quantized[name]
            if name.endswith("gate_up_proj"):
                put_q(base + "gate_proj", r, slice(0, d.I))
                put_q(base + "up_proj", r, slice(d.I, 2 * d.I))
            else:
                put_q(base + "down_proj", r)
        elif name in quantized:
            put_q(name[: -len(".weight")], quantized[name])
        elif kind in ("conv", "pleconv"):
            raise ValueError(f"unexpected conv in MTP: {name}")
        else:
            tensors[name] = ("BF16", mq.f32_to_bf16_bits(w))
    return tensors, quant


def write_checkpoint(out_dir: str, spec_key: str, master: dict, quantized: dict, tf_version: str | None):
    tensors, quant = mlx_tensors_with_mtp(spec_key, master, quantized)
    total = sum(int(np.asarray(a).nbytes) for _, a in tensors.values())
    n_shards = max(1, math.ceil(total / SHARD_LIMIT))
    files = writers.write_sharded(out_dir, tensors, n_shards, {"format": "mlx"},
                                  index_extra={"total_parameters": writers.mlx_total_parameters(tensors, quant)}, always_index=True)
    cfg = writers.mlx_config(spec_key, quant, tf_version)
    for k in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        cfg.pop(k, None)  # text-only model: those fixture ids would name ordinary BPE tokens
    writers.write_json(os.path.join(out_dir, "config.json"), cfg)
    return files, total, writers.mlx_total_parameters(tensors, quant)


def write_tokenizer(out_dir: str, tokenizer, chat_template: str, eos_ids):
    from fixtures import tok

    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"), pretty=True)
    tc = tok.tokenizer_config()
    tc["model_max_length"] = 4096
    writers.write_json(os.path.join(out_dir, "tokenizer_config.json"), tc)
    with open(os.path.join(out_dir, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(chat_template)
    writers.write_json(os.path.join(out_dir, "generation_config.json"),
                       {"eos_token_id": list(eos_ids), "pad_token_id": 0, "do_sample": False})


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))


def dump_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
