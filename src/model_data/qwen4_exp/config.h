// The qwen4_exp text configuration (docs/qwen4_exp.md §1): every field that affects inference,
// parsed from config.json (nested `text_config` or flat form), validated (§1.3) and extended with
// the derived values of §1.4. Description only: no math of the forward pass lives here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::model_data::qwen4_exp {

// After the §1.4 mapping ("full_attention" → qwen_sparse_attention).
enum class LayerType { LinearAttention, QwenSparseAttention };

// Activation of the GDN gated norm (`output_gate_type`, or `hidden_act` when null).
enum class GateActivation { Sigmoid, Silu };

// Where the text fields were read from (§1.1).
enum class ConfigForm {
    Nested,  // top level has `text_config` (Qwen4ExpForConditionalGeneration)
    Flat,    // top level is the text config (Qwen4ExpForCausalLM)
};

std::string_view layer_type_name(LayerType type);           // "linear_attention", ...
std::string_view gate_activation_name(GateActivation act);  // "sigmoid", "silu"
std::string_view config_form_name(ConfigForm form);         // "nested", "flat"

struct RopeParameters {
    std::string rope_type = "default";  // only "default" is supported (§1.2)
    double rope_theta = 0.0;            // required: rope_parameters or text-config rope_theta
    double partial_rotary_factor = 1.0;
    // Absent → HF default [11,11,10], and no sum check (§1.3). Only needed for multimodal input.
    std::optional<std::vector<int64_t>> mrope_section;
    std::optional<bool> mrope_interleaved;
};

// QSA indexer fields: all-or-nothing (§1.3). Absent → plain causal attention (engine extension).
struct IndexerConfig {
    int64_t n_heads = 0;         // nI
    int64_t kv_heads = 0;        // always 1
    int64_t head_dim = 0;        // dI
    int64_t budget = 0;          // B
    int64_t compress_ratio = 0;  // r
};

struct Config {
    // Identity.
    ConfigForm form = ConfigForm::Flat;
    std::string architecture;  // architectures[0], "" when absent
    std::string model_type;    // top-level model_type: qwen4_exp or qwen4_exp_text

    // §1.2, with HF defaults.
    int64_t vocab_size = 248320;       // V
    int64_t hidden_size = 2048;        // H
    int64_t num_hidden_layers = 40;    // L
    int64_t num_attention_heads = 16;  // nH
    int64_t num_key_value_heads = 2;   // nKV
    int64_t head_dim = 256;            // D (explicit null → H / nH)
    std::string hidden_act = "silu";
    double rms_norm_eps = 1e-6;
    bool tie_word_embeddings = false;  // true if either level says so
    RopeParameters rope;
    bool attention_bias = false;
    int64_t linear_conv_kernel_dim = 4;             // Kc
    int64_t linear_key_head_dim = 128;              // dk
    int64_t linear_value_head_dim = 128;            // dv
    int64_t linear_num_key_heads = 16;              // Hk
    int64_t linear_num_value_heads = 32;            // Hv
    int64_t num_experts = 512;                      // E
    int64_t num_experts_per_tok = 10;               // k
    int64_t moe_intermediate_size = 512;            // I
    int64_t shared_expert_intermediate_size = 512;  // Is
    bool norm_topk_prob = true;
    bool layer_types_given = false;  // false → derived from full_attention_interval
    int64_t full_attention_interval = 4;
    std::vector<int64_t> eos_token_ids;  // int or list; [0] is the PLE EOS; empty when null
    int64_t hc_count = 4;                // C
    int64_t hc_lowrank = 320;            // R
    std::vector<int64_t> ple_layer_ids;  // one-indexed, sorted, de-duplicated
    int64_t ple_embed_dim = 0;           // P (null → H)
    int64_t ple_conv_kernel_size = 4;    // Kp
    int64_t ngram_size = 3;              // N
    int64_t heads_per_ngram = 8;         // hpn
    int64_t ngram_vocab_size_base = 20000000;
    int64_t make_ngram_vocab_size_divisible_by = 128;
    uint64_t seed = 1234;                  // n-gram multiplier seed (two's complement if negative)
    int64_t split_ngram_parts = 512;       // nested value wins over the top level
    std::optional<IndexerConfig> indexer;  // QSA fields
    std::optional<std::string> output_gate_type;  // null → hidden_act
    int64_t mtp_num_hidden_layers = 0;
    bool mtp_use_dedicated_embeddings = false;

    // Recorded, no effect on the math.
    std::optional<int64_t> max_position_embeddings;

    // §1.4 derived values.
    std::vector<LayerType> layer_types;  // L entries
    GateActivation output_gate = GateActivation::Sigmoid;
    int64_t rotary_dim = 0;                           // Dr = int(D · partial_rotary_factor)
    int64_t block_topk = 0;                           // K = B / r (0 without QSA fields)
    int64_t key_dim = 0;                              // Hk·dk
    int64_t value_dim = 0;                            // Hv·dv
    int64_t conv_dim = 0;                             // 2·key_dim + value_dim
    int64_t gqa_group = 0;                            // nH / nKV
    int64_t gdn_head_ratio = 0;                       // Hv / Hk
    std::vector<std::optional<int>> ple_layer_index;  // per layer: rank in ple_layer_ids
    int64_t n_ngram_heads = 0;                        // NH = (N-1)·hpn
    int64_t ngram_head_dim = 0;                       // dh = P / NH (0 without PLE)
    int64_t ple_conv_state_len = 0;                   // (Kp-1)·N
    int64_t ngram_context_len = 0;                    // N-1
    int64_t n_conv_states = 1;                        // HF cache: 3 with any PLE layer, else 1

    // The document as read (reader preserves configuration) and the keys this adapter does not
    // know, as dotted paths ("text_config.foo"), for reporting.
    nlohmann::json source;
    std::vector<std::string> unrecognized_keys;

    bool has_ple() const { return !ple_layer_ids.empty(); }
    bool has_indexer() const { return indexer.has_value(); }
    int64_t n_ple_layers() const { return static_cast<int64_t>(ple_layer_ids.size()); }
    int64_t hc_width() const { return hc_count * hidden_size; }  // C·H
    int64_t first_eos() const { return eos_token_ids.empty() ? -1 : eos_token_ids.front(); }
};

// Parses and validates config.json text. `file_name` prefixes every error message, followed by
// the JSON field path ("config.json: text_config.num_experts_per_tok: 12 exceeds num_experts 8").
// Throws cherenkov::Error: InvalidInput for malformed or invalid values, Unsupported for a
// model_type, rope_type or activation this engine does not implement.
Config parse_config(std::string_view json_text, const std::string& file_name);
Config parse_config(const nlohmann::json& document, const std::string& file_name);
// Text overloads, so a std::string or literal does not convert to nlohmann::json ambiguously.
inline Config parse_config(const std::string& json_text, const std::string& file_name) {
    return parse_config(std::string_view(json_text), file_name);
}
inline Config parse_config(const char* json_text, const std::string& file_name) {
    return parse_config(std::string_view(json_text), file_name);
}

// Parsed and derived values for `inspect --json`.
nlohmann::json config_to_json(const Config& config);

}  // namespace cherenkov::model_data::qwen4_exp
