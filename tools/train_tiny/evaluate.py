"""Held-out perplexity, MTP accuracy/acceptance, routing statistics, the fast-path check
against transformers' own code, and greedy reference generations."""

from __future__ import annotations

import math

import numpy as np
import torch

import fastpath
import model as mdl
from fixtures import reference as ref


def load_engine(trunk, mtp, engine_w: dict):
    """Load the engine's weights (Q4-dequantized where quantized) into fresh modules."""
    sd = trunk.state_dict()
    trunk.load_state_dict({n: torch.from_numpy(np.ascontiguousarray(engine_w[n])).to(t.dtype) for n, t in sd.items()}, strict=True)
    sd = mtp.state_dict()
    mtp.load_state_dict({n: torch.from_numpy(np.ascontiguousarray(engine_w["mtp." + n])).to(t.dtype) for n, t in sd.items()}, strict=True)


def windows(tokens: np.ndarray, T: int, n: int) -> np.ndarray:
    """Up to n non-overlapping windows of T+2 tokens (stride T) from the start of the stream."""
    k = min(n, (tokens.size - 2) // T)
    idx = np.arange(k)[:, None] * T + np.arange(T + 2)[None, :]
    return tokens[idx].astype(np.int64)


@torch.no_grad()
def heldout(trunk, mtp, hw: np.ndarray, dev, batch: int, dims) -> dict:
    """Teacher-forced held-out loss (float32, fast path): trunk next-token, MTP next-next-token
    (top-1 accuracy, and agreement of the MTP argmax with the trunk's argmax for the same
    token), QSA sparsity/tie statistics, and routing locality of consecutive tokens."""
    fastpath.enable(True)
    fastpath.STATS.clear()
    fastpath.STATE["stats"] = True
    tap = mdl.RouterTap(trunk.modules())
    T = hw.shape[1] - 2
    nll = mnll = n = macc = magree = nagree = 0.0
    reuse = np.zeros(dims.L)
    anyre = np.zeros(dims.L)
    nre = 0
    load = np.zeros((dims.L, dims.E))
    for i in range(0, hw.shape[0], batch):
        w = torch.from_numpy(hw[i : i + batch]).to(dev)
        tap.take()
        logits, mlog, _ = mdl.forward_all(trunk, mtp, w)
        rl = tap.take()
        nll += mdl.ce(logits, w[:, 1 : T + 1], reduction="sum").item()
        mnll += mdl.ce(mlog, w[:, 2 : T + 2], reduction="sum").item()
        n += w.shape[0] * T
        ma = mlog.argmax(-1)
        macc += (ma == w[:, 2 : T + 2]).sum().item()
        ta = logits.argmax(-1)
        magree += (ma[:, :-1] == ta[:, 1:]).sum().item()
        nagree += w.shape[0] * (T - 1)
        for layer, lg in enumerate(rl[: dims.L]):
            top = lg.float().topk(dims.k, dim=-1).indices.view(w.shape[0], T, dims.k)
            same = (top[:, 1:, :, None] == top[:, :-1, None, :]).any(-1)  # [b, T-1, k]
            reuse[layer] += same.float().mean(-1).sum().item()
            anyre[layer] += same.any(-1).float().sum().item()
            load[layer] += torch.bincount(top.flatten(), minlength=dims.E).cpu().numpy()
        nre += w.shape[0] * (T - 1)
    fastpath.STATE["stats"] = False
    tap.remove()
    st = fastpath.STATS
    load = load / load.sum(1, keepdims=True)
    return {
        "tokens": int(n),
        "nll": nll / n, "ppl": math.exp(nll / n),
        "mtp_nll": mnll / n, "mtp_ppl": math.exp(mnll / n),
        "mtp_top1_acc_token_t_plus_2": macc / n,
        "mtp_argmax_equals_trunk_argmax": magree / nagree,
        "qsa_rows": st.get("rows", 0), "qsa_sparse_rows": st.get("sparse_rows", 0),
        "qsa_sparse_rows_with_exact_tie_at_k": st.get("ties", 0),
        "qsa_sparse_rows_margin_below_1e-4": st.get("near_ties", 0),
        "routing_reuse_mean_fraction_of_topk_in_previous_topk": [round(x / nre, 4) for x in reuse],
        "routing_any_expert_reused_from_previous_token": [round(x / nre, 4) for x in anyre],
        "routing_uniform_baseline_fraction": round(dims.k / dims.E, 4),
        "expert_load_max_over_mean": [round(float(x.max() * dims.E), 3) for x in load],
    }


@torch.no_grad()
def check_equivalence(cfg, engine_w, q_trunk, q_mtp, hw, dev, dims) -> dict:
    """Logits of the fast path (GPU) against transformers' own forward (CPU, eager, float32) on
    the same Q4-dequantized weights, and the MTP head against tools/fixtures/reference.py's."""
    fastpath.enable(False)
    cpu_model = ref.build_model(cfg, {n: v for n, v in engine_w.items() if not n.startswith("mtp.")}, {})
    head = ref.MTPHead(cpu_model, cfg, engine_w, dims)
    out = {"windows": int(hw.shape[0]), "trunk_max_abs": 0.0, "trunk_top1_agree": 0.0, "mtp_max_abs": 0.0, "mtp_top1_agree": 0.0,
           "logit_scale_max_abs": 0.0}
    T = hw.shape[1] - 2
    for w in hw:
        ids = [int(x) for x in w[:T]]
        R, lg = ref.trunk_residuals(cpu_model, ids)
        r1 = head.rows(R, torch.tensor(w[1 : T + 1]), torch.arange(T))
        fastpath.enable(True)
        flog, fmlog, _ = mdl.forward_all(q_trunk, q_mtp, torch.from_numpy(w[None]).to(dev))
        fastpath.enable(False)
        flog, fmlog = flog[0].float().cpu(), fmlog[0].float().cpu()
        out["trunk_max_abs"] = max(out["trunk_max_abs"], float((flog - lg).abs().max()))
        out["trunk_top1_agree"] += float((flog.argmax(-1) == lg.argmax(-1)).float().mean()) / hw.shape[0]
        out["mtp_max_abs"] = max(out["mtp_max_abs"], float((fmlog - r1["logits"]).abs().max()))
        out["mtp_top1_agree"] += float((fmlog.argmax(-1) == r1["logits"].argmax(-1)).float().mean()) / hw.shape[0]
        out["logit_scale_max_abs"] = max(out["logit_scale_max_abs"], float(lg.abs().max()))
    return out


def heldout_sample(docs, max_chars: int):
    """Whole held-out standard-library files, in sorted order, joined by a blank line, up to max_chars."""
    parts, files, n = [], [], 0
    for label, rel, text in sorted(docs, key=lambda d: (d[0] != "stdlib", d[1])):
        if label != "stdlib" or len(text) < 1000 or n + len(text) > max_chars:
            continue
        parts.append(text)
        files.append(f"{label}/{rel}")
        n += len(text) + 2
    return "\n\n".join(parts), files


@torch.no_grad()
def sample_ppl(trunk, ids, T, dev) -> dict:
    """Windows of T tokens, non-overlapping from the start, each scored from a fresh state:
    the NLL of tokens 1..len-1 of every window (fast path, float32)."""
    fastpath.enable(True)
    nll, n = 0.0, 0
    for s in range(0, len(ids), T):
        w = ids[s : s + T]
        if len(w) < 2:
            continue
        x = torch.tensor([w], device=dev)
        out = trunk.model(input_ids=x[:, :-1], use_cache=False)
        lg = trunk.lm_head(out.last_hidden_state)
        nll += mdl.ce(lg, x[:, 1:], reduction="sum").item()
        n += len(w) - 1
    return {"tokens": len(ids), "scored_tokens": n, "nll": nll / n, "ppl": math.exp(nll / n)}


@torch.no_grad()
def greedy(model, ids, steps, dev):
    """Prefill then one token at a time through transformers' cache; argmax (lowest id on ties)."""
    fastpath.enable(False)
    cache, toks = None, []
    x = torch.tensor([ids], dtype=torch.long, device=dev)
    for _ in range(steps):
        out = model(input_ids=x, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        nxt = int(torch.argmax(out.logits[0, -1].float()))
        toks.append(nxt)
        x = torch.tensor([[nxt]], dtype=torch.long, device=dev)
    return toks


@torch.no_grad()
def mtp_acceptance(trunk, mtp, seqs, dev) -> dict:
    """Greedy acceptance of MTP drafts on the reference generations. Each sequence is
    (prompt + the trunk's own greedy continuation, prompt length), so the trunk's argmax at p+1
    is token p+2. Draft 1 at p uses (R_p, x_{p+1}); draft 2 is chained (docs/qwen4_exp.md 6.5): one more MTP
    row at p+1 with (R'_p, d1). Counted where the drafted token lies in the generated part."""
    fastpath.enable(True)
    a1 = n1 = a2 = n2 = 0
    for ids, plen in seqs:
        y = torch.tensor([ids], device=dev)
        n = y.shape[1]
        got = {}
        h = trunk.model.layers[-1].register_forward_hook(lambda m, a, o: got.__setitem__("R", o[0] if isinstance(o, tuple) else o))
        trunk.model(input_ids=y, use_cache=False)
        h.remove()
        R = got["R"]
        cos, sin = mdl.rope(trunk, R, n - 1)
        lg1, Rp = mtp(trunk, R[:, : n - 1], y[:, 1:n], cos, sin, mdl.causal_float_mask(1, n - 1, dev))
        d1 = lg1.argmax(-1)[0]  # d1[p] drafts token p+2
        for p in range(max(0, plen - 2), n - 2):
            ok1 = int(d1[p]) == int(y[0, p + 2])
            a1 += ok1
            n1 += 1
            if p + 3 < n:
                hs = torch.cat([R[:, : p + 1], Rp[:, p : p + 1]], 1)
                xs = torch.cat([y[:, 1 : p + 2], d1[p].view(1, 1)], 1)
                c, s = mdl.rope(trunk, hs, p + 2)
                lg2, _ = mtp(trunk, hs, xs, c, s, mdl.causal_float_mask(1, p + 2, dev))
                a2 += ok1 and int(lg2[0, -1].argmax()) == int(y[0, p + 3])
                n2 += 1
    fastpath.enable(False)
    return {"positions": n1, "draft1_accept_rate": a1 / max(1, n1), "draft1_and_draft2_accept_rate": a2 / max(1, n2),
            "how": "teacher-forced on the greedy reference generations (Q4-dequantized weights, float32, fast path)"}
