// The tiny config of docs/qwen4_exp.md §7 in its flat (text-only) form, shared by the
// qwen4_exp config and layout tests.
#pragma once

#include <nlohmann/json.hpp>

namespace cherenkov::model_data::qwen4_exp::testing {

inline nlohmann::json tiny_flat() {
    return nlohmann::json::parse(R"json({
      "architectures": ["Qwen4ExpForCausalLM"],
      "model_type": "qwen4_exp_text",
      "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 4, "eos_token_id": 2,
      "layer_types": ["linear_attention", "linear_attention",
                      "qwen_sparse_attention", "qwen_sparse_attention"],
      "hc_count": 4, "hc_lowrank": 16,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
      "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "output_gate_type": "sigmoid",
      "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "shared_expert_intermediate_size": 32,
      "ple_layer_ids": [2], "ngram_size": 3, "heads_per_ngram": 2, "ple_embed_dim": 64,
      "ple_conv_kernel_size": 4, "ngram_vocab_size_base": 101,
      "make_ngram_vocab_size_divisible_by": 8, "split_ngram_parts": 3,
      "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
      "indexer_compress_ratio": 4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000,
                          "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1]},
      "mtp_num_hidden_layers": 1
    })json");
}

}  // namespace cherenkov::model_data::qwen4_exp::testing
