// config_to_json: the parsed and derived qwen4_exp configuration for `inspect --json`.
#include <algorithm>

#include "model_data/qwen4_exp/config.h"

namespace cherenkov::model_data::qwen4_exp {

namespace {

using nlohmann::json;

json rope_to_json(const RopeParameters& rope) {
    json out = {
        {"rope_type", rope.rope_type},
        {"rope_theta", rope.rope_theta},
        {"partial_rotary_factor", rope.partial_rotary_factor},
    };
    out["mrope_section"] = rope.mrope_section ? json(*rope.mrope_section) : json(nullptr);
    out["mrope_interleaved"] =
        rope.mrope_interleaved ? json(*rope.mrope_interleaved) : json(nullptr);
    return out;
}

json indexer_to_json(const std::optional<IndexerConfig>& indexer) {
    if (!indexer) return nullptr;
    return {
        {"indexer_n_heads", indexer->n_heads},
        {"indexer_kv_heads", indexer->kv_heads},
        {"indexer_head_dim", indexer->head_dim},
        {"indexer_budget", indexer->budget},
        {"indexer_compress_ratio", indexer->compress_ratio},
    };
}

json derived_to_json(const Config& config) {
    json layer_types = json::array();
    for (LayerType type : config.layer_types) layer_types.push_back(layer_type_name(type));
    json ple_index = json::array();
    for (const auto& index : config.ple_layer_index) {
        ple_index.push_back(index ? json(*index) : json(nullptr));
    }
    const auto n_qsa = std::count(config.layer_types.begin(), config.layer_types.end(),
                                  LayerType::QwenSparseAttention);
    return {
        {"layer_types", std::move(layer_types)},
        {"n_linear_attention_layers", static_cast<int64_t>(config.layer_types.size()) - n_qsa},
        {"n_qwen_sparse_attention_layers", n_qsa},
        {"output_gate", gate_activation_name(config.output_gate)},
        {"rotary_dim", config.rotary_dim},
        {"block_topk", config.has_indexer() ? json(config.block_topk) : json(nullptr)},
        {"key_dim", config.key_dim},
        {"value_dim", config.value_dim},
        {"conv_dim", config.conv_dim},
        {"gqa_group", config.gqa_group},
        {"gdn_head_ratio", config.gdn_head_ratio},
        {"hc_width", config.hc_width()},
        {"ple_layer_index", std::move(ple_index)},
        {"n_ngram_heads", config.n_ngram_heads},
        {"ngram_head_dim", config.ngram_head_dim},
        {"ple_conv_state_len", config.ple_conv_state_len},
        {"ngram_context_len", config.ngram_context_len},
        {"n_conv_states", config.n_conv_states},
        {"ple_eos_token_id", config.has_ple() ? json(config.first_eos()) : json(nullptr)},
    };
}

}  // namespace

json config_to_json(const Config& config) {
    json fields = {
        {"vocab_size", config.vocab_size},
        {"hidden_size", config.hidden_size},
        {"num_hidden_layers", config.num_hidden_layers},
        {"num_attention_heads", config.num_attention_heads},
        {"num_key_value_heads", config.num_key_value_heads},
        {"head_dim", config.head_dim},
        {"hidden_act", config.hidden_act},
        {"rms_norm_eps", config.rms_norm_eps},
        {"tie_word_embeddings", config.tie_word_embeddings},
        {"rope_parameters", rope_to_json(config.rope)},
        {"attention_bias", config.attention_bias},
        {"linear_conv_kernel_dim", config.linear_conv_kernel_dim},
        {"linear_key_head_dim", config.linear_key_head_dim},
        {"linear_value_head_dim", config.linear_value_head_dim},
        {"linear_num_key_heads", config.linear_num_key_heads},
        {"linear_num_value_heads", config.linear_num_value_heads},
        {"num_experts", config.num_experts},
        {"num_experts_per_tok", config.num_experts_per_tok},
        {"moe_intermediate_size", config.moe_intermediate_size},
        {"shared_expert_intermediate_size", config.shared_expert_intermediate_size},
        {"norm_topk_prob", config.norm_topk_prob},
        {"layer_types_given", config.layer_types_given},
        {"full_attention_interval", config.full_attention_interval},
        {"eos_token_id", config.eos_token_ids},
        {"hc_count", config.hc_count},
        {"hc_lowrank", config.hc_lowrank},
        {"ple_layer_ids", config.ple_layer_ids},
        {"ple_embed_dim", config.ple_embed_dim},
        {"ple_conv_kernel_size", config.ple_conv_kernel_size},
        {"ngram_size", config.ngram_size},
        {"heads_per_ngram", config.heads_per_ngram},
        {"ngram_vocab_size_base", config.ngram_vocab_size_base},
        {"make_ngram_vocab_size_divisible_by", config.make_ngram_vocab_size_divisible_by},
        {"seed", config.seed},
        {"split_ngram_parts", config.split_ngram_parts},
        {"qsa_indexer", indexer_to_json(config.indexer)},
        {"output_gate_type",
         config.output_gate_type ? json(*config.output_gate_type) : json(nullptr)},
        {"mtp_num_hidden_layers", config.mtp_num_hidden_layers},
        {"mtp_use_dedicated_embeddings", config.mtp_use_dedicated_embeddings},
        {"max_position_embeddings",
         config.max_position_embeddings ? json(*config.max_position_embeddings) : json(nullptr)},
    };
    return {
        {"architecture", config.architecture},   {"model_type", config.model_type},
        {"form", config_form_name(config.form)}, {"text_config", std::move(fields)},
        {"derived", derived_to_json(config)},    {"unrecognized_keys", config.unrecognized_keys},
    };
}

}  // namespace cherenkov::model_data::qwen4_exp
