#!/usr/bin/env python3
"""Generate the tiny qwen4_exp reference fixtures under tests/fixtures/ (issue 3).

    python3 tools/make_fixtures.py --out tests/fixtures

Needs numpy, safetensors, tokenizers and jinja2 for the checkpoints; torch and transformers
>= 5.17 (with its `qwen4_exp` model) for the reference outputs. Run it where transformers
runs (the GPU machine's python3; everything runs on its CPU in float32). Deterministic:
weights come from seeded numpy generators, the tokenizer from a fixed corpus, and every
reference number from running transformers. `--no-reference` writes only the checkpoints,
tokenizer and prompts (no torch needed).

The template tests/fixtures/tokenizer/chat_template.jinja is an input (a byte-exact copy of
tests/data/chat-template-qwen3.5/qwen3_5_nothink.jinja, copied from there when --out lacks it);
everything else under --out is rewritten.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from fixtures import spec, tok, writers  # noqa: E402

# The Qwen3.5 no-thinking chat template, bundled with its provenance in tests/data (Apache-2.0).
TEMPLATE_SOURCE = os.path.join(REPO, "tests", "data", "chat-template-qwen3.5", "qwen3_5_nothink.jinja")
TEMPLATE_SHA256 = "273d8e0e683b885071fb17e08d71e5f2a5ddfb5309756181681de4f5a1822d80"
INTERMEDIATES_PROMPT = "eos_mid"
MTP_PROMPTS = ["len33", "eos_mid"]
GREEDY_PROMPT, GREEDY_STEPS = "len33", 12


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    meta = hdr.pop("__metadata__", None)
    return meta, {k: {"dtype": v["dtype"], "shape": v["shape"]} for k, v in sorted(hdr.items())}


def versions(with_torch):
    v = {"python": platform.python_version(), "numpy": np.__version__}
    import safetensors
    import tokenizers

    v["safetensors"] = safetensors.__version__
    v["tokenizers"] = tokenizers.__version__
    try:
        import jinja2

        v["jinja2"] = jinja2.__version__
    except Exception:
        pass
    if with_torch:
        import importlib.util

        import torch
        import transformers

        v["torch"] = torch.__version__
        v["transformers"] = transformers.__version__
        v["hub_kernel_packages_present"] = {m: importlib.util.find_spec(m) is not None for m in ("kernels", "fla", "causal_conv1d")}
    return v


def clean_out(out):
    keep = os.path.join(out, "tokenizer", "chat_template.jinja")
    for name in os.listdir(out) if os.path.isdir(out) else []:
        p = os.path.join(out, name)
        if name == "tokenizer":
            for f in os.listdir(p):
                if os.path.join(p, f) != keep:
                    os.remove(os.path.join(p, f))
        elif os.path.isdir(p):
            shutil.rmtree(p)
        elif name not in ("README.md",):
            os.remove(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    ap.add_argument("--no-reference", action="store_true", help="checkpoints, tokenizer and prompts only (no torch)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--configs", default=",".join(spec.CONFIGS))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    t0 = time.time()
    with_ref = not args.no_reference

    tpl_path = os.path.join(out, "tokenizer", "chat_template.jinja")
    if not os.path.exists(tpl_path):
        os.makedirs(os.path.dirname(tpl_path), exist_ok=True)
        shutil.copyfile(TEMPLATE_SOURCE, tpl_path)
    if sha256(tpl_path) != TEMPLATE_SHA256:
        sys.exit(f"{tpl_path} is not the expected qwen3_5_nothink.jinja (sha256 {TEMPLATE_SHA256})")
    template = open(tpl_path, encoding="utf-8").read()
    clean_out(out)

    vers = versions(with_ref)
    tf_version = vers.get("transformers")
    print("versions:", json.dumps(vers), flush=True)

    # ---------------------------------------------------------------- tokenizer, prompts
    tk_dir = os.path.join(out, "tokenizer")
    tk_path = tok.train(tk_dir)
    writers.write_json(os.path.join(tk_dir, "tokenizer_config.json"), tok.tokenizer_config())
    chat_jinja = tok.render_chat(template)
    chat_info = {"rendered_with": "jinja2 (transformers' environment settings)"}
    if with_ref:
        try:
            from transformers import PreTrainedTokenizerFast

            t = PreTrainedTokenizerFast(tokenizer_file=tk_path, eos_token="<|im_end|>", pad_token="<|endoftext|>")
            chat_tf = t.apply_chat_template(tok.CHAT, tokenize=False, add_generation_prompt=True, chat_template=template, enable_thinking=False)
            chat_info["transformers_apply_chat_template_equal"] = chat_tf == chat_jinja
            if chat_tf != chat_jinja:
                chat_info["transformers_text"] = chat_tf
        except Exception as e:
            chat_info["transformers_apply_chat_template_error"] = f"{type(e).__name__}: {e}"
    prompts = tok.prompts(tk_path, chat_jinja)
    writers.write_json(
        os.path.join(out, "prompts.json"),
        {"chat_messages": tok.CHAT, "chat_text": chat_jinja, "chat_render": chat_info, "texts": tok.TEXTS, "prompts": prompts},
        sort_keys=False,
    )

    # ---------------------------------------------------------------- checkpoints
    checkpoints, references, results, errors = {}, {}, {}, []
    engine = {}
    for cname in args.configs.split(","):
        c = spec.CONFIGS[cname]
        a_log_f32 = any(writers.FORMS.get(f, {}).get("a_log_f32") for f in c["forms"])
        master = spec.master_weights(cname, a_log_f32=a_log_f32)
        quantized = spec.quantize_all(master)
        engine[cname] = spec.engine_weights(master, quantized)
        for form in c["forms"]:
            d = os.path.join(out, cname, form)
            if form == "mlx_q4":
                tensors, quant = writers.mlx_tensors(cname, master, quantized)
                cfg = writers.mlx_config(cname, quant, tf_version)
                files = writers.write_sharded(
                    d, tensors, 1, {"format": "mlx"},
                    index_extra={"total_parameters": writers.mlx_total_parameters(tensors, quant)}, always_index=True,
                )
            else:
                f = writers.FORMS[form]
                tensors = writers.hf_tensors(cname, master, f)
                cfg = writers.hf_config(cname, nested=f["nested"], transformers_version=tf_version)
                files = writers.write_sharded(d, tensors, f["shards"], {"format": "pt"})
            writers.write_json(os.path.join(d, "config.json"), cfg)
            for fn in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copyfile(os.path.join(tk_dir, fn), os.path.join(d, fn))
            shutil.copyfile(tpl_path, os.path.join(d, "chat_template.jinja"))
            checkpoints[f"{cname}/{form}"] = {"config": cname, "form": form, "tensor_files": files}
        print(f"[{time.time() - t0:6.1f}s] wrote checkpoints of {cname}", flush=True)

    # ---------------------------------------------------------------- references
    if with_ref:
        import torch

        from fixtures import reference as ref

        torch.set_num_threads(args.threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
        for cname in args.configs.split(","):
            c = spec.CONFIGS[cname]
            d = spec.Dims(spec.text_config(cname))
            nested = writers.FORMS[c["forms"][0]]["nested"] if c["forms"][0] in writers.FORMS else True
            info, res = {}, {}
            results[cname] = res
            rdir = os.path.join(out, cname, "reference")
            os.makedirs(rdir, exist_ok=True)
            cfg = ref.build_text_config(cname, nested)
            model = ref.build_model(cfg, engine[cname], info)
            res["model"] = info
            print(f"[{time.time() - t0:6.1f}s] {cname}: model built {info}", flush=True)

            # logits of every prompt, full forward
            lt = {}
            full = {}
            for pname, p in prompts.items():
                lg = ref.forward_logits(model, p["ids"])
                full[pname] = lg
                lt[f"logits.{pname}"] = ("F32", ref._np(lg))
                lt[f"input_ids.{pname}"] = ("I64", np.array(p["ids"], dtype=np.int64))
            # greedy continuation with the cache
            g = ref.safe(lambda: ref.greedy_cached(model, prompts[GREEDY_PROMPT]["ids"], GREEDY_STEPS, False), errors, f"{cname} greedy")
            if g is not None:
                gids, glog = g
                lt[f"greedy.{GREEDY_PROMPT}.ids"] = ("I64", np.array(gids, dtype=np.int64))
                lt[f"greedy.{GREEDY_PROMPT}.logits"] = ("F32", ref._np(glog))
                ext = prompts[GREEDY_PROMPT]["ids"] + gids
                fl = ref.forward_logits(model, ext)
                n0 = len(prompts[GREEDY_PROMPT]["ids"])
                res["greedy_cached_vs_full_max_abs"] = float((fl[n0 : n0 + GREEDY_STEPS] - glog).abs().max())
                res["greedy_argmax_consistent_with_full"] = bool((fl[n0 - 1 : n0 - 1 + GREEDY_STEPS].argmax(-1) == torch.tensor(gids)).all())
            writers.write_safetensors(os.path.join(rdir, "logits.safetensors"), lt, {"format": "pt"})

            # incremental (cached) decode vs the full forward
            inc = {}
            res["incremental_vs_full_max_abs"] = inc
            for pname in ("chat", "len33", "eos_mid", "eos_first"):
                ids = prompts[pname]["ids"]
                n = len(ids)
                pre = min(n - 1, max(1, n // 3))
                schedules = {
                    f"prefill{pre}+decode1x{n - pre}": [pre] + [1] * (n - pre),
                    "uneven:" + "+".join(map(str, ref.uneven_chunks(n))): ref.uneven_chunks(n),
                }
                if n <= 40:
                    schedules["token_by_token"] = [1] * n
                if pname == "eos_mid":
                    schedules["split_after_each_eos:8+5+6+5"] = [8, 5, 6, 5]
                for si, (sname, ch) in enumerate(schedules.items()):
                    # implicit positions = what generate() does; explicit ones (only for the
                    # first schedule) check that the cache derives the same positions
                    for explicit in (False, True) if si == 0 else (False,):
                        key = f"{pname}/{sname}/{'explicit_position_ids' if explicit else 'implicit_positions'}"
                        r = ref.safe(lambda: ref.cached_logits(model, ids, ch, explicit), errors, f"{cname} {key}")
                        if r is not None:
                            inc[key] = float((r[0] - full[pname]).abs().max())
            print(f"[{time.time() - t0:6.1f}s] {cname}: incremental {json.dumps(inc)}", flush=True)

            # per-layer intermediates
            it = ref.safe(lambda: ref.intermediates(model, prompts[INTERMEDIATES_PROMPT]["ids"], d), errors, f"{cname} intermediates")
            if it is not None:
                tens, summ, logits_i = it
                res["intermediates"] = summ
                res["intermediates_logits_vs_full_max_abs"] = float(np.abs(logits_i - ref._np(full[INTERMEDIATES_PROMPT])).max())
                st = {}
                for k, v in sorted(tens.items()):
                    dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8"}[v.dtype]
                    st[k] = (dt, v)
                writers.write_safetensors(os.path.join(rdir, "intermediates.safetensors"), st, {"format": "pt"})
            qsa_layers = [i for i, t in enumerate(d.types) if t == "qwen_sparse_attention"]
            res["standalone_qsa_layer_call_max_abs"] = ref.safe(
                lambda: ref.standalone_layer_check(model, qsa_layers[0], prompts[INTERMEDIATES_PROMPT]["ids"]), errors, f"{cname} standalone"
            )

            # MTP
            if c["mtp"]:
                def run_mtp():
                    head = ref.MTPHead(model, cfg, engine[cname], d)
                    mt, cons = {}, {}
                    for pname in MTP_PROMPTS:
                        o, consist = ref.mtp_reference(model, head, prompts[pname]["ids"])
                        cons[pname] = consist
                        for k, v in o.items():
                            # the trunk residual of the intermediates prompt is its layers.{L-1}.x_out
                            if pname == INTERMEDIATES_PROMPT and k == "trunk_residual":
                                continue
                            if pname != INTERMEDIATES_PROMPT and k in ("e_hat", "fe", "h_hat", "U", "mixer_out", "r_prime"):
                                continue
                            mt[f"mtp.{pname}.{k}"] = ("I64" if v.dtype == np.int64 else "F32", v)
                    writers.write_safetensors(os.path.join(rdir, "mtp.safetensors"), mt, {"format": "pt"})
                    return cons

                cons = ref.safe(run_mtp, errors, f"{cname} mtp")
                res["mtp_chained_run_exact_rows_vs_draft1_max_abs"] = cons

            # transformers' own loader on the written BF16 checkpoints
            res["from_pretrained"] = {}
            for form in c["forms"]:
                if form not in writers.FORMS:
                    continue
                res["from_pretrained"][form] = ref.safe(
                    lambda: check_from_pretrained(os.path.join(out, cname, form), cname, form), errors, f"{cname} from_pretrained {form}"
                )
            references[cname] = {
                "config": cname,
                "applies_to_checkpoints": [f"{cname}/{f}" for f in c["forms"]],
                "files": sorted(f"{cname}/reference/{x}" for x in os.listdir(rdir)),
                "logits_prompts": sorted(prompts),
                "intermediates_prompt": INTERMEDIATES_PROMPT,
                "greedy": {"prompt": GREEDY_PROMPT, "steps": GREEDY_STEPS},
                "mtp_prompts": MTP_PROMPTS if c["mtp"] else [],
            }
            print(f"[{time.time() - t0:6.1f}s] {cname}: references done", flush=True)
            del model

    # ---------------------------------------------------------------- manifest
    files = []
    for root, _, names in os.walk(out):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, out)
            if rel in ("manifest.json", "README.md"):
                continue
            e = {"path": rel, "bytes": os.path.getsize(p), "sha256": sha256(p)}
            if n.endswith(".safetensors"):
                e["metadata"], e["tensors"] = st_header(p)
            files.append(e)
    files.sort(key=lambda e: e["path"])
    manifest = {
        "schema": 1,
        "generator": {
            "script": "tools/make_fixtures.py",
            "command": "python3 tools/make_fixtures.py --out tests/fixtures",
            "versions": vers,
            "seconds": round(time.time() - t0, 1),
        },
        "quantization": {
            "algorithm": "MLX affine, docs/formats.md 2.5, GPU/Metal variant: float32 arithmetic, wmax floored at 0, "
            "round half away from zero, q from the unrounded float32 scale/bias, scales/biases stored bfloat16 (RNE)",
            "main": {"bits": 4, "group_size": 64},
            "ngram_table": {"bits": 4, "group_size": 32},
            "quantized": "every Linear / Embedding weight: embed_tokens, lm_head, all q/k/v/o, index_qk_proj, in_proj_{qkv,z,b,a}, "
            "out_proj, hyper-connection input_mix_weight_{down,up} and block_inject_weight (trunk, final mixer, MTP), experts, "
            "shared_expert.{gate,up,down}_proj, shared_expert_gate, ple key_proj/value_proj, the n-gram table, mtp.fc_{embedding,hidden}",
            "full_precision": "routers (mlp.gate), conv1d (GDN and PLE), every norm vector, A_log, dt_bias, the int64 PLE buffers",
        },
        "configs": {n: {"text_config": spec.text_config(n), "mtp_tensors": spec.CONFIGS[n]["mtp"], "forms": spec.CONFIGS[n]["forms"]} for n in args.configs.split(",")},
        "checkpoints": checkpoints,
        "references": references,
        "prompts": {k: len(v["ids"]) for k, v in prompts.items()},
        "results": results,
        "errors": errors,
        "files": files,
        "total_bytes": sum(e["bytes"] for e in files),
    }
    writers.write_json(os.path.join(out, "manifest.json"), manifest, sort_keys=False)
    print(f"[{time.time() - t0:6.1f}s] done: {len(files)} files, {manifest['total_bytes']} bytes, {len(errors)} errors", flush=True)
    return 0 if not errors else 1


def check_from_pretrained(path, cname, form):
    """Load the written BF16 checkpoint with transformers' own loader; compare every loaded
    tensor with the stored values (bf16 upcast to float32)."""
    import torch
    from transformers.models.qwen4_exp import modeling_qwen4_exp as M

    f = writers.FORMS[form]
    master = spec.master_weights(cname, a_log_f32=f["a_log_f32"])
    model = M.Qwen4ExpForCausalLM.from_pretrained(path, dtype=torch.float32)
    sd = model.state_dict()
    worst, missing = 0.0, []
    for n, (kind, w) in master.items():
        if n.startswith("mtp."):
            continue
        if n not in sd:
            missing.append(n)
            continue
        worst = max(worst, float(np.abs(sd[n].float().numpy() - w.astype(np.float32)).max()) if kind != "buffer" else float(np.abs(sd[n].numpy() - w).max()))
    return {"max_abs_vs_written": worst, "missing": missing[:10]}


if __name__ == "__main__":
    sys.exit(main())
