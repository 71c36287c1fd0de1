#!/usr/bin/env python3
"""Greedy generation and held-out perplexity from the committed MLX 4-bit checkpoint, in
PyTorch (transformers' qwen4_exp, float32, CPU or GPU): the reference to compare Cherenkov with.

    python3 tools/train_tiny/generate.py models/tiny-python --prompt 'def add(a, b):' --tokens 48
    python3 tools/train_tiny/generate.py models/tiny-python --chat 'Write a Python function ...'
    python3 tools/train_tiny/generate.py models/tiny-python --check      # replay training_record.json
    python3 tools/train_tiny/generate.py models/tiny-python --heldout    # heldout_sample.txt perplexity

The weights are the checkpoint's, dequantized exactly (docs/formats.md 2.3) with the fixtures'
quantizer module: what the engine holds. Generation runs transformers' own code and cache;
the perplexity uses the same windowing as training_record.json (windows of 256 tokens from
a fresh state, tokens 1..255 of every window scored).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import config  # noqa: E402
from fixtures import mlx_quant as mq  # noqa: E402
from fixtures import spec  # noqa: E402


def read_checkpoint(d):
    """name -> numpy array (BF16 as uint16 bits), over every shard of the index."""
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    dt = {"BF16": np.uint16, "F32": np.float32, "I64": np.int64, "U32": np.uint32}
    out = {}
    for f in sorted(set(idx["weight_map"].values())):
        raw = open(os.path.join(d, f), "rb").read()
        n = int.from_bytes(raw[:8], "little")
        hdr = json.loads(raw[8 : 8 + n])
        hdr.pop("__metadata__", None)
        for name, e in hdr.items():
            a, b = e["data_offsets"]
            out[name] = np.frombuffer(raw, dtype=dt[e["dtype"]], count=(b - a) // np.dtype(dt[e["dtype"]]).itemsize, offset=8 + n + a).reshape(e["shape"])
    return out


def text_config_of(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    t = dict(cfg["text_config"])
    t["layer_types"] = ["qwen_sparse_attention" if x == "full_attention" else x for x in t["layer_types"]]
    return t


def engine_weights(d, key):
    """canonical name (spec.inventory) -> float32 (dequantized where quantized) / int64."""
    st = read_checkpoint(d)
    cfgq = json.load(open(os.path.join(d, "config.json")))["quantization"]
    dims = spec.Dims(spec.text_config(key))
    f32 = lambda a: mq.bf16_bits_to_f32(a) if a.dtype == np.uint16 else a.astype(np.float32)  # noqa: E731

    def deq(base):
        gs = cfgq.get(base, {}).get("group_size", cfgq["group_size"]) if isinstance(cfgq.get(base), dict) else cfgq["group_size"]
        w = st[base + ".weight"]
        n = w.shape[-1] * 32 // 4
        return mq.dequantize(mq.unpack(w, 4, n), st[base + ".scales"], st[base + ".biases"], gs)

    out = {}
    for name, shape, kind in spec.inventory(key):
        if kind == "expert":
            base = name.rsplit(".experts.", 1)[0] + ".switch_mlp."
            w = np.concatenate([deq(base + "gate_proj"), deq(base + "up_proj")], 1) if name.endswith("gate_up_proj") else deq(base + "down_proj")
        elif kind == "ngram":
            base = name[: -len("weight")]
            w = np.concatenate([deq(f"{base}shard_{j}") for j in range(dims.t["split_ngram_parts"])], 0)
        elif name[: -len(".weight")] + ".scales" in st:
            w = deq(name[: -len(".weight")])
        elif kind in ("conv", "pleconv"):
            w = np.transpose(f32(st[name]), (0, 2, 1))
        elif kind == "buffer":
            w = st[name].astype(np.int64)
        else:
            w = f32(st[name])
        if tuple(w.shape) != tuple(shape):
            raise ValueError(f"{name}: {w.shape} != {shape}")
        out[name] = np.ascontiguousarray(w)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt", action="append", default=[])
    ap.add_argument("--chat", action="append", default=[], help="a user message, rendered with the chat template")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--check", action="store_true", help="regenerate training_record.json's samples and compare ids")
    ap.add_argument("--heldout", action="store_true", help="perplexity of heldout_sample.txt")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    import torch
    from tokenizers import Tokenizer

    import data
    import evaluate as ev
    import fastpath
    import model as mdl
    from fixtures import reference as ref

    torch.set_num_threads(args.threads)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    t = text_config_of(args.model)
    base = dict(config.TEXT)
    key = config.register({k: t[k] for k in base if k in t})
    if spec.text_config(key)["layer_types"] != t["layer_types"]:
        raise SystemExit("config mismatch")
    w = engine_weights(args.model, key)
    cfg = ref.build_text_config(key, nested=False)
    tk = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    results = {}
    model = ref.build_model(cfg, {n: v for n, v in w.items() if not n.startswith("mtp.")}, {}).to(dev)
    jobs = [(f"prompt{i}", p) for i, p in enumerate(args.prompt)]
    jobs += [(f"chat{i}", data.chat_text([("user", c)]) + "<|im_start|>assistant\n") for i, c in enumerate(args.chat)]
    rec = None
    if args.check:
        rec = json.load(open(os.path.join(args.model, "training_record.json")))
        jobs += [(n, s["prompt"]) for n, s in rec["generation"]["samples"].items() if "prompt" in s]
    for name, text in jobs:
        ids = tk.encode(text, add_special_tokens=False).ids
        n = len(rec["generation"]["samples"][name]["greedy_ids"]) if rec and name in rec["generation"]["samples"] else args.tokens
        t0 = time.time()
        g = ev.greedy(model, ids, n, dev)
        r = {"prompt": text, "prompt_ids": ids, "greedy_ids": g, "text": tk.decode(g, skip_special_tokens=False), "seconds": round(time.time() - t0, 1)}
        if rec and name in rec["generation"]["samples"]:
            want = rec["generation"]["samples"][name]["greedy_ids"]
            r["matches_record"] = g == want
            r["first_mismatch"] = next((i for i, (a, b) in enumerate(zip(g, want)) if a != b), None)
        results[name] = r
        print(f"== {name} ({r['seconds']}s){' matches record: ' + str(r.get('matches_record')) if 'matches_record' in r else ''}")
        print(text + r["text"])
        print(json.dumps(g))
    if args.heldout:
        trunk, mtp = mdl.build(cfg, 0)
        ev.load_engine(trunk, mtp, w)
        trunk.to(dev).eval()
        ids = tk.encode(open(os.path.join(args.model, "heldout_sample.txt"), encoding="utf-8").read(), add_special_tokens=False).ids
        results["heldout_sample"] = ev.sample_ppl(trunk, ids, 256, dev)
        fastpath.enable(False)
        print("heldout_sample.txt:", json.dumps(results["heldout_sample"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
