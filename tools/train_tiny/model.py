"""transformers' qwen4_exp trunk plus the MTP head of docs/qwen4_exp.md section 6.

The MTP head is built from transformers' own modules exactly as the fixtures' reference
(tools/fixtures/reference.py `MTPHead`) builds it, but batched and trainable; its parameter
names below `mtp.` are the checkpoint names of spec 6.2.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.qwen4_exp import modeling_qwen4_exp as M
from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig

from fixtures import reference as ref


class MTPHead(nn.Module):
    """spec 6.3: U_s = fc_hidden(RMS1p(h)[s]) + fc_embedding(RMS1p(embed(x))); one QSA+MoE decoder
    layer with hyper-connections (no PLE); its own output mixer; the trunk's lm_head."""

    def __init__(self, cfg: Qwen4ExpTextConfig):
        super().__init__()
        d = cfg.to_dict()
        d.update(num_hidden_layers=1, layer_types=["qwen_sparse_attention"], ple_layer_ids=[])
        mcfg = Qwen4ExpTextConfig.from_dict(d)
        ref._set_impl(mcfg, "_attn_implementation", "eager")
        ref._set_impl(mcfg, "_experts_implementation", "eager")
        self.H, self.C = cfg.hidden_size, cfg.hc_count
        eps = cfg.rms_norm_eps
        self.pre_fc_norm_embedding = M.Qwen4ExpTextRMSNorm(self.H, eps=eps)
        self.pre_fc_norm_hidden = M.Qwen4ExpTextRMSNorm(self.C * self.H, eps=eps)  # one statistic over C*H
        self.fc_embedding = nn.Linear(self.H, self.H, bias=False)
        self.fc_hidden = nn.Linear(self.H, self.H, bias=False)
        self.layers = nn.ModuleList([M.Qwen4ExpTextDecoderLayer(mcfg, 0)])
        self.hyper_connection_mixer = M.Qwen4ExpTextGatedResidual(mcfg, use_combine=False)

    def forward(self, trunk, R, next_ids, cos, sin, mask):
        """R [B, T, C*H] trunk residuals (pre final mixer) at positions 0..T-1, next_ids [B, T]
        the tokens at 1..T. Returns (logits [B, T, V] predicting the tokens at 2..T+1, R')."""
        B, T, _ = R.shape
        e = trunk.model.embed_tokens(next_ids)
        fe = self.fc_embedding(self.pre_fc_norm_embedding(e))
        h = self.pre_fc_norm_hidden(R)
        U = (self.fc_hidden(h.view(B, T, self.C, self.H)) + fe.unsqueeze(2)).reshape(B, T, self.C * self.H)
        Rp = self.layers[0](U, position_embeddings=(cos, sin), attention_mask=mask, conv_mask=None, past_key_values=None, ple_input_ids=None)
        Rp = Rp[0] if isinstance(Rp, tuple) else Rp
        return trunk.lm_head(self.hyper_connection_mixer(Rp)), Rp


def build(cfg: Qwen4ExpTextConfig, seed: int):
    """Trunk (HF init) and MTP head (initialised with the trunk's _init_weights), float32."""
    torch.manual_seed(seed)
    trunk = M.Qwen4ExpForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32).float()
    torch.manual_seed(seed + 1)
    mtp = MTPHead(cfg).float()
    with torch.no_grad():
        for m in mtp.modules():
            trunk._init_weights(m)
    return trunk, mtp


def causal_float_mask(B, T, device, dtype=torch.float32):
    return torch.full((T, T), torch.finfo(dtype).min, device=device, dtype=dtype).triu(1)[None, None].expand(B, 1, T, T)


def rope(trunk, x, T):
    B = x.shape[0]
    pos3 = torch.arange(T, device=x.device).view(1, 1, T).expand(3, B, T)
    return trunk.model.rotary_emb(x, pos3)


class RouterTap:
    """Collects every router's logits (trunk and MTP) during a forward."""

    def __init__(self, modules):
        self.logits = []
        self.handles = [m.register_forward_hook(self._hook) for m in modules if isinstance(m, M.Qwen4ExpTextTopKRouter)]

    def _hook(self, mod, args, out):
        self.logits.append(out[0])

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def take(self):
        x, self.logits = self.logits, []
        return x


def forward_all(trunk, mtp, windows, with_mtp=True):
    """windows [B, T+2] token ids. Returns (trunk logits [B,T,V] for targets windows[:,1:T+1],
    MTP logits [B,T,V] for targets windows[:,2:T+2] or None, R [B,T,C*H])."""
    B, T2 = windows.shape
    T = T2 - 2
    x = windows[:, :T]
    got = {}
    hook = trunk.model.layers[-1].register_forward_hook(lambda m, a, o: got.__setitem__("R", o[0] if isinstance(o, tuple) else o))
    try:
        out = trunk.model(input_ids=x, use_cache=False)
    finally:
        hook.remove()
    logits = trunk.lm_head(out.last_hidden_state)
    R = got["R"]
    mlog = None
    if with_mtp:
        cos, sin = rope(trunk, R, T)
        mlog, _ = mtp(trunk, R, windows[:, 1 : T + 1], cos, sin, causal_float_mask(B, T, R.device))
    return logits, mlog, R


def ce(logits, targets, reduction="mean"):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction)
