"""Training-speed replacements for two transformers qwen4_exp modules, same math.

transformers' QSA indexer loops in Python over every (batch row, query) pair and its
selection carries no gradient, so (a) it is far too slow to train with and (b) the indexer
weights would never learn. While `enable(True)` is in force:

* `Qwen4ExpTextAttention.forward` (no cache only) computes the indexer scores of every query
  against every compressed block at once, selects the same blocks (top `B/r` of the complete
  visible blocks, plus the incomplete tail, docs/qwen4_exp.md 3.6), and runs gated attention with
  that token mask (softmax in float32, as transformers' eager attention). It also adds an indexer loss (recorded in `AUX`): the KL
  divergence from the dense causal attention's probability mass per block (detached, mean
  over heads) to the softmax of the indexer scores (indexer input detached), as in
  DeepSeek-V3.2's sparse-attention indexer training, plus a hinge that keeps every block's best
  indexer head above a margin, so scores never collapse to exact zeros (a dead relu, ties at the
  top-k boundary). Only the indexer weights get these gradients.
* `Qwen4ExpTextExperts.forward` computes every expert for every token as two dense GEMMs and
  weights them by the (sparse) top-k routing weights: equal to the routed sum, and at this
  size much faster than a per-expert loop.

With `enable(False)` (the default) both modules run transformers' own code: every reference
number (perplexities, generation) in the model README comes from that path, and
`check_equivalence` compares the two.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from transformers.models.qwen4_exp import modeling_qwen4_exp as M

_ORIG_ATTN = M.Qwen4ExpTextAttention.forward
_ORIG_EXPERTS = M.Qwen4ExpTextExperts.forward

STATE = {"fast": False, "indexer_loss": True, "stats": False}
AUX = {"indexer_kl": [], "indexer_hinge": []}
POS_MARGIN = 1.0
STATS = {}  # selection statistics, collected while STATE["stats"]


def enable(on: bool, indexer_loss: bool = True):
    STATE["fast"] = bool(on)
    STATE["indexer_loss"] = bool(indexer_loss)


def indexer_scores(idx, x, cos, sin, return_pre=False):
    """Scores [B, T, nblk] (fp32) of every query against every complete block, docs/qwen4_exp.md 3.6."""
    B, T, _ = x.shape
    nI, dI, r = idx.index_n_heads, idx.index_head_dim, idx.compress_ratio
    qk = idx.index_qk_proj(x)
    q, kraw = torch.split(qk, [nI * dI, dI], dim=-1)
    q = idx.q_layernorm(q.reshape(B, T, nI, dI))
    q = M.apply_rotary_pos_emb(q, cos=cos, sin=sin, unsqueeze_dim=2)
    nblk = T // r
    pooled = kraw[:, : nblk * r].reshape(B, nblk, r, dI).float().mean(dim=2).to(kraw.dtype)
    pooled = idx.k_layernorm(pooled)
    kb = M.apply_rotary_pos_emb(pooled.unsqueeze(2), cos=cos[:, : nblk * r : r], sin=sin[:, : nblk * r : r], unsqueeze_dim=2).squeeze(2)
    s = torch.einsum("btnd,bkd->btnk", q.float(), kb.float())
    if return_pre:
        return torch.relu(s).sum(dim=2) / math.sqrt(dI), s
    return torch.relu(s).sum(dim=2) / math.sqrt(dI)


def selection_mask(scores, T, r, K):
    """Boolean [B, T, T] token mask: selected complete blocks + the tail, causal."""
    B, _, nblk = scores.shape
    dev = scores.device
    t = torch.arange(T, device=dev)
    nb = (t + 1) // r  # complete blocks visible to query t
    valid = torch.arange(nblk, device=dev)[None, :] < nb[:, None]  # [T, nblk]
    masked = scores.masked_fill(~valid[None], float("-inf"))
    k = min(K, nblk)
    sel = torch.zeros(B, T, nblk + 1, dtype=torch.bool, device=dev)
    if k > 0:
        top = masked.topk(k, dim=-1)
        sel.scatter_(-1, top.indices, torch.isfinite(top.values))
    sel = sel[..., :nblk]
    j = torch.arange(T, device=dev)
    blk = torch.clamp(j // r, max=max(nblk - 1, 0))
    in_sel = sel[..., blk] & (j < nblk * r)[None, None, :]  # [B, T, T]
    tail = j[None, :] >= (nb * r)[:, None]
    causal = j[None, :] <= t[:, None]
    return causal[None] & (in_sel | tail[None]), valid


def attention_forward(self, hidden_states, position_embeddings, attention_mask=None, past_key_values=None, **kwargs):
    if not STATE["fast"] or past_key_values is not None:
        return _ORIG_ATTN(self, hidden_states, position_embeddings, attention_mask, past_key_values, **kwargs)
    B, T, _ = hidden_states.shape
    cos, sin = position_embeddings
    cos, sin = cos[:, -T:], sin[:, -T:]
    idx = self.indexer
    r, K = idx.compress_ratio, idx.block_topk
    scores, pre = indexer_scores(idx, hidden_states.detach(), cos, sin, return_pre=True)
    mask, valid = selection_mask(scores.detach(), T, r, K)
    if STATE["stats"]:
        with torch.no_grad():
            sparse = valid.sum(-1) > K  # [T]
            srt = scores.masked_fill(~valid[None], float("-inf")).sort(dim=-1, descending=True).values
            if srt.shape[-1] > K:
                m = (srt[..., K - 1] - srt[..., K])[:, sparse]
                rel = m / srt[..., 0][:, sparse].abs().clamp_min(1e-30)
                STATS["ties"] = STATS.get("ties", 0) + int((m == 0).sum())
                STATS["near_ties"] = STATS.get("near_ties", 0) + int((rel <= 1e-4).sum())
            STATS["rows"] = STATS.get("rows", 0) + B * T
            STATS["sparse_rows"] = STATS.get("sparse_rows", 0) + B * int(sparse.sum())

    D = self.head_dim
    q, gate = torch.chunk(self.q_proj(hidden_states).view(B, T, -1, 2 * D), 2, dim=-1)
    gate = gate.reshape(B, T, -1)
    q = self.q_norm(q).transpose(1, 2)
    k = self.k_norm(self.k_proj(hidden_states).view(B, T, -1, D)).transpose(1, 2)
    v = self.v_proj(hidden_states).view(B, T, -1, D).transpose(1, 2)
    q, k = M.apply_rotary_pos_emb(q, k, cos, sin)
    k = M.repeat_kv(k, self.num_key_value_groups)
    v = M.repeat_kv(v, self.num_key_value_groups)
    # eager attention as transformers' (fp32 softmax), written out: deterministic backward
    lg = torch.matmul(q, k.to(q.dtype).transpose(-1, -2)) * self.scaling
    p = torch.softmax(lg.float().masked_fill(~mask[:, None], float("-inf")), dim=-1).to(q.dtype)
    o = torch.matmul(p, v.to(q.dtype)).transpose(1, 2).reshape(B, T, -1)
    o = self.o_proj(o * torch.sigmoid(gate))

    if STATE["indexer_loss"] and self.training:
        with torch.no_grad():
            causal = torch.ones(T, T, dtype=torch.bool, device=lg.device).tril()
            p = torch.softmax(lg.float().masked_fill(~causal, float("-inf")), dim=-1).mean(dim=1)  # [B, T, T]
            nblk = scores.shape[-1]
            pb = p[..., : nblk * r].reshape(B, T, nblk, r).sum(-1)
            pb = pb * valid[None]
            rows = valid.sum(-1) >= 2  # queries with a choice among at least two blocks
            tgt = pb / pb.sum(-1, keepdim=True).clamp_min(1e-9)
        logq = torch.log_softmax(scores.masked_fill(~valid[None], float("-inf")), dim=-1)
        logq = torch.where(valid[None], logq, torch.zeros_like(logq))
        kl = (tgt * (torch.log(tgt.clamp_min(1e-9)) - logq)).sum(-1)  # [B, T]
        AUX["indexer_kl"].append((kl * rows[None]).sum() / (rows.sum() * B).clamp_min(1))
        # keep every block's best head above POS_MARGIN: relu-sum scores that collapse to exactly 0
        # (a dead indexer, or ties at the top-k boundary) would make the selection arbitrary
        hinge = torch.relu(POS_MARGIN - pre.max(dim=2).values)  # [B, T, nblk]
        AUX["indexer_hinge"].append((hinge * valid[None]).sum() / (valid.sum() * B))
    return o, None


def experts_forward(self, hidden_states, top_k_index, top_k_weights):
    if not STATE["fast"]:
        return _ORIG_EXPERTS(self, hidden_states, top_k_index, top_k_weights)
    N, H = hidden_states.shape
    E, I = self.num_experts, self.intermediate_dim
    w = torch.zeros(N, E, dtype=top_k_weights.dtype, device=hidden_states.device).scatter(1, top_k_index, top_k_weights)
    gu = F.linear(hidden_states, self.gate_up_proj.reshape(E * 2 * I, H)).view(N, E, 2 * I)
    g, u = gu.chunk(2, dim=-1)
    a = self.act_fn(g) * u * w.unsqueeze(-1).to(g.dtype)
    return F.linear(a.reshape(N, E * I), self.down_proj.permute(1, 0, 2).reshape(H, E * I))


M.Qwen4ExpTextAttention.forward = attention_forward
M.Qwen4ExpTextExperts.forward = experts_forward
