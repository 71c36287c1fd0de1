#!/usr/bin/env python3
"""Train the bundled small qwen4_exp model (issue 10) and write its MLX 4-bit checkpoint.

    python3 tools/train_tiny/train.py --out DIR            # the committed model (one H200, ~8 min)
    python3 tools/train_tiny/train.py --out DIR --toy      # CPU smoke test at a toy size

Runs on the GPU machine's python3 (torch, transformers 5.17, tokenizers, numpy, safetensors).
Deterministic: a fixed corpus (files found on the machine, sorted), a fixed held-out split, a
seeded model init and a seeded batch order; `torch.use_deterministic_algorithms` is on.

Steps: corpus + tokenizer (data.py) -> transformers' Qwen4ExpForCausalLM trunk + MTP head
(model.py), trained jointly in bf16 autocast with next-token, MTP next-next-token, router
load-balancing and QSA-indexer losses (fastpath.py) -> held-out evaluation of the trained and
the Q4-dequantized model -> MLX 4-bit checkpoint (export.py) with tokenizer, chat template,
training_record.json and reference generations.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import config  # noqa: E402  (registers nothing yet)
import data  # noqa: E402

T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


TOY = {
    "hidden_size": 64, "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "qwen_sparse_attention"],
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
    "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_num_key_heads": 1, "linear_num_value_heads": 2,
    "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
    "ngram_vocab_size_base": 1000, "indexer_n_heads": 2, "indexer_head_dim": 32, "indexer_budget": 8,
}

PROMPTS = {
    "fibonacci": 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "list_files": "import os\n\n\ndef list_python_files(root):\n",
    "class": "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n",
}
CHAT = [("user", "Write a Python function `is_prime(n)`: Return True if n is a prime number.")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/tiny-python-out"))
    ap.add_argument("--toy", action="store_true", help="CPU smoke test: toy model, few files, few steps")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--lb-weight", type=float, default=0.01)
    ap.add_argument("--indexer-weight", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sources", default="stdlib,numpy,scipy,sympy,networkx,pandas,sklearn")
    ap.add_argument("--max-files", type=int, default=0, help="use only every k-th file (toy runs)")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--eval-windows", type=int, default=None)
    ap.add_argument("--gen-tokens", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=420.0, help="safety stop for the training loop (seconds)")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--bench", default="", help="only time training steps on random tokens for these batch sizes (e.g. 128,256)")
    args = ap.parse_args()
    toy = args.toy
    steps = args.steps or (30 if toy else 5000)
    B = args.batch or (4 if toy else 64)
    T = args.seq or (64 if toy else 256)
    warmup = args.warmup if args.warmup is not None else max(1, min(200, steps // 20))
    eval_windows = args.eval_windows or (8 if toy else 1024)
    gen_tokens = args.gen_tokens or (16 if toy else 96)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    ck = os.path.join(out, "work", config.NAME)  # assembled checkpoint folder
    if os.path.isdir(os.path.join(out, "work")):
        shutil.rmtree(os.path.join(out, "work"))
    os.makedirs(ck)

    import torch

    import fastpath
    import model as mdl
    from fixtures import reference as ref
    from fixtures import spec
    import export
    import transformers

    dev = torch.device("cuda" if torch.cuda.is_available() and not toy else "cpu")
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if dev.type == "cpu":
        torch.set_num_threads(max(1, args.workers))
    versions = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
                "numpy": np.__version__}
    import tokenizers
    import safetensors

    versions.update(tokenizers=tokenizers.__version__, safetensors=safetensors.__version__)
    if dev.type == "cuda":
        versions["gpu"] = torch.cuda.get_device_name(0)
    log(f"versions {json.dumps(versions)}")
    record = {"model": config.NAME, "versions": versions, "argv": sys.argv[1:], "seed": args.seed}

    if args.bench:
        return bench(args, dev, T)

    # ------------------------------------------------------------------ data
    names = args.sources.split(",")
    if toy:
        names = ["stdlib"]
        orig_list = data.list_files
        data.list_files = lambda srcs: orig_list(srcs)[:: max(1, args.max_files or 12)]
    elif args.max_files:
        orig_list = data.list_files
        data.list_files = lambda srcs: orig_list(srcs)[:: args.max_files]
    d = data.build(names, workers=args.workers, log=log, vocab_size=config.VOCAB_SIZE,
                   max_chat=2000 if toy else 40000, tokenizer_sample_bytes=5_000_000 if toy else 60_000_000)
    record["data"] = d["record"]
    tk = d["tokenizer"]
    train_tok = torch.from_numpy(d["train"].astype(np.int32)).to(dev)
    held = d["heldout"]

    # ------------------------------------------------------------------ model
    key = config.register(TOY if toy else None)
    cfg = ref.build_text_config(key, nested=False)
    dims = spec.Dims(spec.text_config(key))
    trunk, mtp = mdl.build(cfg, args.seed)
    trunk.to(dev)
    mtp.to(dev)
    n_trunk = sum(p.numel() for p in trunk.parameters())
    n_mtp = sum(p.numel() for p in mtp.parameters())
    log(f"model: trunk {n_trunk / 1e6:.2f} M params, MTP {n_mtp / 1e6:.2f} M; config {json.dumps(spec.text_config(key))}")
    record["text_config"] = spec.text_config(key)
    record["params"] = {"trunk": n_trunk, "mtp": n_mtp}

    named = [(f"trunk.{n}", p) for n, p in trunk.named_parameters()] + [(f"mtp.{n}", p) for n, p in mtp.named_parameters()]
    decay = [p for n, p in named if p.ndim >= 2 and "conv1d" not in n]
    no_decay = [p for n, p in named if not (p.ndim >= 2 and "conv1d" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    params = [p for _, p in named]
    tap = mdl.RouterTap(list(trunk.modules()) + list(mtp.modules()))

    def lr_at(s):
        if s < warmup:
            return args.lr * (s + 1) / warmup
        p = (s - warmup) / max(1, steps - warmup)
        return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))

    # batch order: non-overlapping chunks of T tokens (windows of T+2), shuffled per epoch
    n_chunks = (train_tok.numel() - T - 2) // T
    rng = np.random.default_rng(args.seed)
    ar = torch.arange(T + 2, device=dev)
    order, pos, epoch = rng.permutation(n_chunks), 0, 0

    def next_batch():
        nonlocal order, pos, epoch
        if pos + B > n_chunks:
            order, pos, epoch = rng.permutation(n_chunks), 0, epoch + 1
        idx = torch.from_numpy(order[pos : pos + B] * T).to(dev)
        pos += B
        return train_tok[idx[:, None] + ar[None, :]].long()

    # ------------------------------------------------------------------ train
    fastpath.enable(True)
    trunk.train()
    mtp.train()
    amp = dict(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    hist = []
    t_train = time.time()
    done = 0
    stopped_early = False
    caught = []
    warnings.simplefilter("always")
    shown = warnings.showwarning
    warnings.showwarning = lambda message, *a, **k: caught.append(str(message))
    for step in range(steps):
        if step == 2:  # ops without a deterministic implementation warn on first use
            warnings.showwarning = shown
            nondet = sorted({c[:300] for c in caught if "determinis" in c})
            record["nondeterministic_op_warnings"] = nondet
            for m_ in nondet:
                log(f"warning: {m_}")
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        w = next_batch()
        fastpath.AUX["indexer_kl"].clear()
        fastpath.AUX["indexer_hinge"].clear()
        tap.take()
        with torch.autocast(**amp):
            logits, mlog, _ = mdl.forward_all(trunk, mtp, w)
            lm = mdl.ce(logits, w[:, 1 : T + 1])
            ml = mdl.ce(mlog, w[:, 2 : T + 2])
            lb = mdl.M.load_balancing_loss_func(tuple(x.float() for x in tap.take()), dims.E, dims.k)
            ikl = torch.stack(fastpath.AUX["indexer_kl"]).mean()
            ihg = torch.stack(fastpath.AUX["indexer_hinge"]).mean()
            loss = lm + args.mtp_weight * ml + args.lb_weight * lb + args.indexer_weight * (ikl + ihg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        done = step + 1
        if step % args.log_every == 0 or done == steps:
            el = time.time() - t_train
            row = {"step": done, "loss": round(loss.item(), 4), "lm": round(lm.item(), 4), "mtp": round(ml.item(), 4),
                   "lb": round(lb.item(), 4), "indexer_kl": round(ikl.item(), 4), "indexer_hinge": round(ihg.item(), 4), "grad_norm": round(gn.item(), 3),
                   "lr": lr_at(step), "epoch": epoch, "seconds": round(el, 1), "tokens_per_s": round(done * B * T / max(el, 1e-9))}
            hist.append(row)
            log(json.dumps(row))
            if el > args.time_limit and done < steps:
                stopped_early = True
                log(f"time limit {args.time_limit}s reached after {done} steps")
                break
    if dev.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.time() - t_train
    record["training"] = {
        "steps": done, "planned_steps": steps, "stopped_early_by_time_limit": stopped_early, "batch": B, "seq": T,
        "tokens_seen": done * B * T, "epochs": round(done * B / n_chunks, 3), "wall_seconds": round(train_s, 1),
        "lr": args.lr, "min_lr_frac": args.min_lr_frac, "warmup": warmup, "schedule": "linear warmup, cosine decay",
        "optimizer": "AdamW(0.9, 0.95), grad clip 1.0", "weight_decay": args.weight_decay,
        "loss_weights": {"lm": 1.0, "mtp": args.mtp_weight, "router_load_balancing": args.lb_weight, "qsa_indexer_kl_plus_hinge": args.indexer_weight,
                         "indexer_hinge_margin": fastpath.POS_MARGIN},
        "precision": "float32 master weights, bf16 autocast" if dev.type == "cuda" else "float32 (CPU)",
        "final": hist[-1] if hist else None, "history": hist,
        "peak_gpu_mem_gb": round(torch.cuda.max_memory_allocated() / 1e9, 2) if dev.type == "cuda" else None,
    }
    log(f"trained {done} steps in {train_s:.1f}s")

    # ------------------------------------------------------------------ export
    trunk.eval()
    mtp.eval()
    master = export.master_from_state(key, trunk.state_dict(), mtp.state_dict())
    quantized = spec.quantize_all(master)
    engine_w = spec.engine_weights(master, quantized)
    files, tensor_bytes, total_params = export.write_checkpoint(ck, key, master, quantized, transformers.__version__)
    export.write_tokenizer(ck, tk, data.CHAT_TEMPLATE, dims.eos_list)
    log(f"checkpoint: {files}, {tensor_bytes / 1e6:.2f} MB tensors, {total_params} parameters")
    record["checkpoint"] = {"tensor_files": files, "tensor_bytes": tensor_bytes, "mlx_total_parameters": total_params}

    # ------------------------------------------------------------------ evaluation
    import evaluate as ev

    q_trunk, q_mtp = mdl.build(cfg, args.seed)
    ev.load_engine(q_trunk, q_mtp, engine_w)
    q_trunk.to(dev).eval()
    q_mtp.to(dev).eval()
    hw = ev.windows(held, T, eval_windows)
    res = {"heldout_windows": int(hw.shape[0]), "window": T + 2, "scored_tokens_per_window": T}
    for tag, (tr, mt) in {"trained_fp32": (trunk, mtp), "q4_dequantized": (q_trunk, q_mtp)}.items():
        res[tag] = ev.heldout(tr, mt, hw, dev, batch=32 if not toy else 4, dims=dims)
        log(f"held-out {tag}: {json.dumps(res[tag])}")
    res["fast_vs_transformers"] = ev.check_equivalence(cfg, engine_w, q_trunk, q_mtp, hw[: 2 if not toy else 1], dev, dims)
    log(f"fast path vs transformers: {json.dumps(res['fast_vs_transformers'])}")
    sample_text, sample_files = ev.heldout_sample(d["heldout_docs"], max_chars=8000 if toy else 40000)
    with open(os.path.join(out, "work", "heldout_sample.txt"), "w", encoding="utf-8") as f:
        f.write(sample_text)
    res["heldout_sample"] = {"files": sample_files, "chars": len(sample_text)}
    sample_ids = tk.encode(sample_text, add_special_tokens=False).ids
    for tag, (tr, mt) in {"trained_fp32": (trunk, mtp), "q4_dequantized": (q_trunk, q_mtp)}.items():
        res["heldout_sample"][tag] = ev.sample_ppl(tr, sample_ids, T, dev)
    log(f"held-out sample: {json.dumps(res['heldout_sample'])}")
    record["evaluation"] = res

    # reference greedy generations through transformers' own code (cache, eager), fp32
    fastpath.enable(False)
    gens = {}
    qref = ref.build_model(cfg, {n: v for n, v in engine_w.items() if not n.startswith("mtp.")}, {}).to(dev)
    prompts = dict(PROMPTS)
    prompts["chat"] = data.chat_text(CHAT) + "<|im_start|>assistant\n"
    for name, text in prompts.items():
        ids = tk.encode(text, add_special_tokens=False).ids
        g = ev.greedy(qref, ids, gen_tokens, dev)
        gens[name] = {"prompt": text, "prompt_ids": ids, "greedy_ids": g, "text": tk.decode(g, skip_special_tokens=False)}
        log(f"generation {name}: {json.dumps(gens[name]['text'])}")
    g = ev.greedy(trunk, tk.encode(PROMPTS["fibonacci"], add_special_tokens=False).ids, gen_tokens, dev)
    gens["fibonacci_trained_fp32"] = {"greedy_ids": g, "text": tk.decode(g, skip_special_tokens=False)}
    record["generation"] = {"how": "transformers Qwen4ExpForCausalLM (eager, its own cache), float32, Q4-dequantized weights, greedy (argmax)",
                            "max_new_tokens": gen_tokens, "samples": gens}
    record["mtp_greedy_acceptance"] = ev.mtp_acceptance(
        q_trunk, q_mtp, [(g_["prompt_ids"] + g_["greedy_ids"], len(g_["prompt_ids"])) for g_ in gens.values() if "prompt_ids" in g_], dev)
    log(f"MTP acceptance on the generations: {json.dumps(record['mtp_greedy_acceptance'])}")
    record["wall_seconds_total"] = round(time.time() - T0, 1)
    export.dump_json(os.path.join(out, "work", "training_record.json"), record)

    # ------------------------------------------------------------------ files for $OUT (<= 8 files)
    for fn in files:
        shutil.copyfile(os.path.join(ck, fn), os.path.join(out, fn))
    with tarfile.open(os.path.join(out, "rest.tar"), "w") as tf:
        for fn in sorted(os.listdir(ck)):
            if fn not in files:
                tf.add(os.path.join(ck, fn), arcname=fn)
        for fn in ("training_record.json", "heldout_sample.txt"):
            tf.add(os.path.join(out, "work", fn), arcname=fn)
    shutil.rmtree(os.path.join(out, "work"))
    log(f"done: {sorted(os.listdir(out))}")


def bench(args, dev, T):
    """Step time of the training step (random tokens) for a few batch sizes."""
    import torch

    import fastpath
    import model as mdl
    from fixtures import reference as ref
    from fixtures import spec

    key = config.register(TOY if args.toy else None)
    cfg = ref.build_text_config(key, nested=False)
    dims = spec.Dims(spec.text_config(key))
    fastpath.enable(True)
    for det in (True, False):
        torch.use_deterministic_algorithms(det, warn_only=True)
        for B in [int(x) for x in args.bench.split(",")]:
            if not det and B != int(args.bench.split(",")[-1]):
                continue
            trunk, mtp = mdl.build(cfg, 0)
            trunk.to(dev).train()
            mtp.to(dev).train()
            params = list(trunk.parameters()) + list(mtp.parameters())
            opt = torch.optim.AdamW(params, lr=1e-3, fused=dev.type == "cuda")
            tap = mdl.RouterTap(list(trunk.modules()) + list(mtp.modules()))
            g = torch.Generator(device="cpu").manual_seed(0)
            cuda = dev.type == "cuda"
            sync = torch.cuda.synchronize if cuda else (lambda: None)
            if cuda:
                torch.cuda.reset_peak_memory_stats()

            def step():
                w = torch.randint(3, dims.V, (B, T + 2), generator=g).to(dev)
                fastpath.AUX["indexer_kl"].clear()
                fastpath.AUX["indexer_hinge"].clear()
                tap.take()
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=cuda):
                    lg, ml, _ = mdl.forward_all(trunk, mtp, w)
                    loss = mdl.ce(lg, w[:, 1 : T + 1]) + 0.3 * mdl.ce(ml, w[:, 2 : T + 2])
                    loss = loss + 0.01 * mdl.M.load_balancing_loss_func(tuple(x.float() for x in tap.take()), dims.E, dims.k)
                    loss = loss + 0.1 * (torch.stack(fastpath.AUX["indexer_kl"]).mean() + torch.stack(fastpath.AUX["indexer_hinge"]).mean())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()

            for _ in range(3):
                step()
            sync()
            t = time.time()
            n = 6
            for _ in range(n):
                step()
            sync()
            dt = (time.time() - t) / n
            log(f"bench deterministic={det} B={B} T={T}: {dt * 1000:.0f} ms/step, {B * T / dt:.0f} tokens/s, "
                f"peak {torch.cuda.max_memory_allocated() / 1e9 if cuda else 0:.1f} GB")
            if det and B == int(args.bench.split(",")[-1]):
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                    step()
                    sync()
                srt = "self_cuda_time_total" if cuda else "self_cpu_time_total"
                print(prof.key_averages().table(sort_by=srt, row_limit=25, max_name_column_width=60), flush=True)
            tap.remove()
            if cuda:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
