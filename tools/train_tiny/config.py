"""The text config of the bundled trained model, registered in tools/fixtures/spec.py.

Registering it in `spec.CONFIGS` lets the fixture modules (tensor inventory, MLX quantizer,
checkpoint writers, transformers reference helpers) work on this model unchanged.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
REPO = os.path.dirname(TOOLS)
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

from fixtures import spec  # noqa: E402

NAME = "tiny-python"
SPEC_KEY = "tiny_python"  # key in spec.CONFIGS

ENDOFTEXT, IM_START, IM_END = spec.ENDOFTEXT, spec.IM_START, spec.IM_END  # 0, 1, 2
VOCAB_SIZE = 4096

# Every quantized axis (H, C*H, R, Hv*dv, nH*D, I, Is, P) is a multiple of 64; n-gram rows 32.
TEXT = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 256,
    "num_hidden_layers": 12,
    # QSA at 3, 7 and 11 (as full_attention_interval 4 would give), GDN elsewhere
    "layer_types": (["linear_attention"] * 3 + ["qwen_sparse_attention"]) * 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "rope_parameters": {"rope_type": "default", "mrope_interleaved": True, "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.25, "mrope_section": [3, 3, 2]},
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "output_gate_type": "sigmoid",
    "num_experts": 24,
    "num_experts_per_tok": 3,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 256,
    "norm_topk_prob": True,
    "hc_count": 2,
    "hc_lowrank": 64,
    "ple_layer_ids": [2],
    "ple_embed_dim": 128,
    "ple_conv_kernel_size": 4,
    "ngram_size": 3,
    "heads_per_ngram": 2,
    "ngram_vocab_size_base": 32768,
    "make_ngram_vocab_size_divisible_by": 128,
    "split_ngram_parts": 4,
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 64,
    "indexer_budget": 64,
    "indexer_compress_ratio": 4,
    "eos_token_id": [IM_END, ENDOFTEXT],
    "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": False,
    "max_position_embeddings": 4096,
}


def register(overrides: dict | None = None) -> str:
    """Put the config (optionally with overrides, e.g. a toy size for CPU tests) into spec.CONFIGS."""
    text = dict(TEXT)
    text.update(overrides or {})
    spec.CONFIGS[SPEC_KEY] = {"text": text, "mtp": True, "forms": ["mlx_q4"]}
    return SPEC_KEY


def text_config() -> dict:
    return spec.text_config(SPEC_KEY)
