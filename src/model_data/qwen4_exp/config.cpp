// Parses config.json into qwen4_exp::Config: §1.1 forms, §1.2 fields and HF defaults, §1.3
// validation, §1.4 derived values. Every error names the file and the JSON field path.
#include "model_data/qwen4_exp/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "base/error.h"
#include "model_data/qwen4_exp/config_fields.h"

namespace cherenkov::model_data::qwen4_exp {

namespace {

using nlohmann::json;

// Engine limits: far above any real qwen4_exp size, low enough that every derived product fits
// in int64 and no allocation sized from a config can run away.
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxHeads = int64_t{1} << 16;
constexpr int64_t kMaxVocab = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxHcCount = 64;
constexpr int64_t kMaxKernel = 1024;
constexpr int64_t kMaxNgramSize = 16;
constexpr int64_t kMaxHeadsPerNgram = 256;
constexpr int64_t kMaxNgramBase = int64_t{1} << 40;
constexpr int64_t kMaxDivisor = int64_t{1} << 20;
constexpr int64_t kMaxSplitParts = int64_t{1} << 24;
constexpr int64_t kMaxMtpLayers = 256;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int kMaxJsonDepth = 64;

// Keys of the text config this adapter reads or knows to have no effect on the math (§1.2).
const std::set<std::string, std::less<>>& known_text_keys() {
    static const std::set<std::string, std::less<>> keys = {
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "tie_word_embeddings",
        "rope_parameters", "rope_theta", "partial_rotary_factor", "attention_bias",
        "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "num_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size", "norm_topk_prob", "layer_types",
        "full_attention_interval", "eos_token_id", "hc_count", "hc_lowrank", "ple_layer_ids",
        "ple_embed_dim", "ple_conv_kernel_size", "ngram_size", "heads_per_ngram",
        "ngram_vocab_size_base", "make_ngram_vocab_size_divisible_by", "seed", "split_ngram_parts",
        "indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget",
        "indexer_compress_ratio", "output_gate_type", "mtp_num_hidden_layers",
        "mtp_use_dedicated_embeddings",
        // No effect on the math.
        "max_position_embeddings", "pad_token_id", "bos_token_id", "attention_dropout",
        "initializer_range", "output_router_logits", "router_aux_loss_coef", "use_cache", "dtype",
        "torch_dtype", "mamba_ssm_dtype", "attn_output_gate", "model_type", "architectures",
        "transformers_version"};
    return keys;
}

// Top-level keys of the nested form besides text_config.
const std::set<std::string, std::less<>>& known_outer_keys() {
    static const std::set<std::string, std::less<>> keys = {
        "model_type",          "architectures",        "text_config",
        "vision_config",       "tie_word_embeddings",  "split_ngram_parts",
        "image_token_id",      "video_token_id",       "vision_start_token_id",
        "vision_end_token_id", "transformers_version", "dtype",
        "torch_dtype",         "quantization",         "quantization_config"};
    return keys;
}

const std::set<std::string, std::less<>>& known_rope_keys() {
    static const std::set<std::string, std::less<>> keys = {
        "rope_type",        "type", "rope_theta", "partial_rotary_factor", "mrope_section",
        "mrope_interleaved"};
    return keys;
}

void collect_unrecognized(const json& object, const std::string& prefix,
                          const std::set<std::string, std::less<>>& known,
                          std::vector<std::string>& out) {
    for (const auto& item : object.items()) {
        if (known.count(item.key()) == 0) out.push_back(prefix + item.key());
    }
}

void read_identity(const FieldReader& root, Config& config) {
    if (!root.has("model_type")) root.fail("model_type", "missing");
    config.model_type = root.get_string("model_type", "");
    if (config.model_type != "qwen4_exp" && config.model_type != "qwen4_exp_text") {
        root.fail("model_type", "'" + config.model_type + "' is not qwen4_exp or qwen4_exp_text",
                  ErrorKind::Unsupported);
    }
    const json* architectures = root.find("architectures");
    if (architectures == nullptr) return;
    if (!architectures->is_array()) {
        root.fail("architectures",
                  std::string("expected a list of strings, got ") + architectures->type_name());
    }
    if (architectures->empty()) return;
    if (!(*architectures)[0].is_string()) {
        root.fail("architectures[0]",
                  std::string("expected a string, got ") + (*architectures)[0].type_name());
    }
    config.architecture = (*architectures)[0].get<std::string>();
}

void read_sizes(const FieldReader& text, Config& config) {
    config.vocab_size = text.get_int("vocab_size", config.vocab_size, 1, kMaxVocab);
    config.hidden_size = text.get_int("hidden_size", config.hidden_size, 1, kMaxDim);
    config.num_hidden_layers =
        text.get_int("num_hidden_layers", config.num_hidden_layers, 1, kMaxLayers);
    config.num_attention_heads =
        text.get_int("num_attention_heads", config.num_attention_heads, 1, kMaxHeads);
    config.num_key_value_heads =
        text.get_int("num_key_value_heads", config.num_key_value_heads, 1, kMaxHeads);
    // Absent → HF default 256; explicit null → H / nH (§1.2).
    if (text.is_null("head_dim")) {
        config.head_dim = config.hidden_size / config.num_attention_heads;
        if (config.head_dim == 0) {
            text.fail("head_dim", "null, and hidden_size / num_attention_heads is 0");
        }
    } else {
        config.head_dim = text.get_int("head_dim", config.head_dim, 1, kMaxDim);
    }
    config.hidden_act = text.get_string("hidden_act", config.hidden_act);
    config.rms_norm_eps = text.get_number("rms_norm_eps", config.rms_norm_eps);
    if (!(config.rms_norm_eps > 0.0)) {
        text.fail("rms_norm_eps", "must be positive, got " + format_number(config.rms_norm_eps));
    }
    config.attention_bias = text.get_bool("attention_bias", config.attention_bias);
    config.linear_conv_kernel_dim =
        text.get_int("linear_conv_kernel_dim", config.linear_conv_kernel_dim, 1, kMaxKernel);
    config.linear_key_head_dim =
        text.get_int("linear_key_head_dim", config.linear_key_head_dim, 1, kMaxDim);
    config.linear_value_head_dim =
        text.get_int("linear_value_head_dim", config.linear_value_head_dim, 1, kMaxDim);
    config.linear_num_key_heads =
        text.get_int("linear_num_key_heads", config.linear_num_key_heads, 1, kMaxHeads);
    config.linear_num_value_heads =
        text.get_int("linear_num_value_heads", config.linear_num_value_heads, 1, kMaxHeads);
    config.hc_count = text.get_int("hc_count", config.hc_count, 2, kMaxHcCount);
    config.hc_lowrank = text.get_int("hc_lowrank", config.hc_lowrank, 1, kMaxDim);
    config.max_position_embeddings = text.get_optional_int("max_position_embeddings", 0, kMaxInt64);
}

// MoE rules of §1.3.
void read_moe(const FieldReader& text, Config& config) {
    config.num_experts = text.get_int("num_experts", config.num_experts, 1, kMaxExperts);
    config.num_experts_per_tok =
        text.get_int("num_experts_per_tok", config.num_experts_per_tok, 1, kMaxExperts);
    if (config.num_experts_per_tok > config.num_experts) {
        text.fail("num_experts_per_tok", std::to_string(config.num_experts_per_tok) +
                                             " exceeds num_experts " +
                                             std::to_string(config.num_experts));
    }
    config.moe_intermediate_size =
        text.get_int("moe_intermediate_size", config.moe_intermediate_size, 1, kMaxDim);
    config.shared_expert_intermediate_size = text.get_int(
        "shared_expert_intermediate_size", config.shared_expert_intermediate_size, 1, kMaxDim);
    config.norm_topk_prob = text.get_bool("norm_topk_prob", config.norm_topk_prob);
}

// rope_parameters with the fallback to text-config rope_theta / partial_rotary_factor (§1.2).
// Returns the field path the partial_rotary_factor came from, for later messages.
std::string read_rope(const FieldReader& text, Config& config) {
    RopeParameters& rope = config.rope;
    const json* object = text.find("rope_parameters");
    std::optional<FieldReader> params;
    if (object != nullptr && !object->is_null()) {
        if (!object->is_object()) {
            text.fail("rope_parameters",
                      std::string("expected an object, got ") + object->type_name());
        }
        params.emplace(text.nested("rope_parameters"));
        collect_unrecognized(*object, text.path("rope_parameters") + ".", known_rope_keys(),
                             config.unrecognized_keys);
    }
    if (params) {
        // Some exports spell the key `type` (data/config-examples/SOURCE.md).
        const char* type_key = params->has("rope_type") ? "rope_type" : "type";
        rope.rope_type = params->get_string(type_key, rope.rope_type);
        if (rope.rope_type != "default") {
            params->fail(type_key, "'" + rope.rope_type + "' is not supported (only 'default')",
                         ErrorKind::Unsupported);
        }
    }
    const FieldReader* theta_source = nullptr;
    if (params && params->has("rope_theta")) {
        theta_source = &*params;
    } else if (text.has("rope_theta")) {
        theta_source = &text;
    }
    if (theta_source == nullptr) {
        text.fail("rope_parameters.rope_theta", "missing (and no rope_theta fallback)");
    }
    rope.rope_theta = theta_source->get_number("rope_theta", 0.0);
    if (!(rope.rope_theta > 0.0)) {
        theta_source->fail("rope_theta", "must be positive, got " + format_number(rope.rope_theta));
    }
    const FieldReader* factor_source = nullptr;
    if (params && params->has("partial_rotary_factor")) {
        factor_source = &*params;
    } else if (text.has("partial_rotary_factor")) {
        factor_source = &text;
    }
    std::string factor_path = text.path("rope_parameters.partial_rotary_factor");
    if (factor_source != nullptr) {
        rope.partial_rotary_factor = factor_source->get_number("partial_rotary_factor", 1.0);
        factor_path = factor_source->path("partial_rotary_factor");
        if (!(rope.partial_rotary_factor > 0.0 && rope.partial_rotary_factor <= 1.0)) {
            factor_source->fail(
                "partial_rotary_factor",
                "must be in (0, 1], got " + format_number(rope.partial_rotary_factor));
        }
    }
    if (params && params->has("mrope_section")) {
        rope.mrope_section = params->get_int_list("mrope_section", 0, kMaxDim);
    }
    if (params && params->has("mrope_interleaved")) {
        rope.mrope_interleaved = params->get_bool("mrope_interleaved", false);
    }
    return factor_path;
}

void read_layer_types(const FieldReader& text, Config& config) {
    const int64_t n_layers = config.num_hidden_layers;
    const json* given = text.find("layer_types");
    config.full_attention_interval =
        text.get_int("full_attention_interval", config.full_attention_interval, 0, kMaxInt64);
    if (given == nullptr || given->is_null()) {
        if (config.full_attention_interval < 1) {
            text.fail("full_attention_interval",
                      "must be positive to derive layer_types, got " +
                          std::to_string(config.full_attention_interval));
        }
        for (int64_t layer = 0; layer < n_layers; ++layer) {
            const bool full = (layer + 1) % config.full_attention_interval == 0;
            config.layer_types.push_back(full ? LayerType::QwenSparseAttention
                                              : LayerType::LinearAttention);
        }
        return;
    }
    if (!given->is_array()) {
        text.fail("layer_types",
                  std::string("expected a list of strings, got ") + given->type_name());
    }
    if (static_cast<int64_t>(given->size()) != n_layers) {
        text.fail("layer_types", "has " + std::to_string(given->size()) +
                                     " entries, num_hidden_layers is " + std::to_string(n_layers));
    }
    config.layer_types_given = true;
    for (size_t layer = 0; layer < given->size(); ++layer) {
        const json& entry = (*given)[layer];
        const std::string field = "layer_types[" + std::to_string(layer) + "]";
        if (!entry.is_string()) {
            text.fail(field, std::string("expected a string, got ") + entry.type_name());
        }
        const auto& name = entry.get_ref<const std::string&>();
        if (name == "linear_attention") {
            config.layer_types.push_back(LayerType::LinearAttention);
        } else if (name == "qwen_sparse_attention" || name == "full_attention") {
            config.layer_types.push_back(LayerType::QwenSparseAttention);
        } else {
            text.fail(field, "'" + name +
                                 "' is not linear_attention, qwen_sparse_attention or "
                                 "full_attention");
        }
    }
}

// Gate activation (§1.3) and the engine's fixed SiLU for the conv and experts (§3.5, §3.7).
void read_activations(const FieldReader& text, Config& config) {
    if (text.has("output_gate_type")) {
        config.output_gate_type = text.get_string("output_gate_type", "");
    }
    const std::string& gate =
        config.output_gate_type ? *config.output_gate_type : config.hidden_act;
    const char* gate_field = config.output_gate_type ? "output_gate_type" : "hidden_act";
    if (gate == "sigmoid") {
        config.output_gate = GateActivation::Sigmoid;
    } else if (gate == "silu") {
        config.output_gate = GateActivation::Silu;
    } else {
        text.fail(gate_field, "'" + gate + "' is not sigmoid or silu (gate activation)");
    }
    if (config.hidden_act != "silu") {
        text.fail("hidden_act",
                  "'" + config.hidden_act + "' is not supported (the conv and experts use silu)",
                  ErrorKind::Unsupported);
    }
}

// QSA indexer fields: all-or-nothing, positive, kv_heads 1, budget a multiple of the ratio.
void read_indexer(const FieldReader& text, Config& config) {
    struct Field {
        const char* key;
        int64_t max;
        int64_t IndexerConfig::*member;
    };
    static constexpr Field kFields[] = {
        {"indexer_n_heads", kMaxHeads, &IndexerConfig::n_heads},
        {"indexer_kv_heads", kMaxHeads, &IndexerConfig::kv_heads},
        {"indexer_head_dim", kMaxDim, &IndexerConfig::head_dim},
        {"indexer_budget", kMaxInt32, &IndexerConfig::budget},
        {"indexer_compress_ratio", kMaxInt32, &IndexerConfig::compress_ratio},
    };
    const char* first_set = nullptr;
    for (const Field& field : kFields) {
        if (text.has(field.key)) {
            first_set = field.key;
            break;
        }
    }
    if (first_set == nullptr) return;
    IndexerConfig indexer;
    for (const Field& field : kFields) {
        if (!text.has(field.key)) {
            text.fail(field.key, std::string("missing while ") + first_set +
                                     " is set (QSA fields are all-or-nothing)");
        }
        indexer.*field.member = text.get_int(field.key, 0, 1, field.max);
    }
    if (indexer.kv_heads != 1) {
        text.fail("indexer_kv_heads", "must be 1, got " + std::to_string(indexer.kv_heads));
    }
    if (indexer.budget % indexer.compress_ratio != 0) {
        text.fail("indexer_budget", std::to_string(indexer.budget) +
                                        " is not a multiple of indexer_compress_ratio " +
                                        std::to_string(indexer.compress_ratio));
    }
    config.indexer = indexer;
}

void read_ple(const FieldReader& text, Config& config) {
    if (text.has("ple_layer_ids")) {
        config.ple_layer_ids =
            text.get_int_list("ple_layer_ids", std::numeric_limits<int64_t>::min(), kMaxInt64);
        std::sort(config.ple_layer_ids.begin(), config.ple_layer_ids.end());
        config.ple_layer_ids.erase(
            std::unique(config.ple_layer_ids.begin(), config.ple_layer_ids.end()),
            config.ple_layer_ids.end());
    }
    config.ple_embed_dim = text.has("ple_embed_dim") ? text.get_int("ple_embed_dim", 0, 0, kMaxDim)
                                                     : config.hidden_size;
    config.ple_conv_kernel_size =
        text.get_int("ple_conv_kernel_size", config.ple_conv_kernel_size, 1, kMaxKernel);
    config.ngram_size = text.get_int("ngram_size", config.ngram_size, 2, kMaxNgramSize);
    config.heads_per_ngram =
        text.get_int("heads_per_ngram", config.heads_per_ngram, 0, kMaxHeadsPerNgram);
    config.ngram_vocab_size_base =
        text.get_int("ngram_vocab_size_base", config.ngram_vocab_size_base, 1, kMaxNgramBase);
    config.make_ngram_vocab_size_divisible_by =
        text.get_int("make_ngram_vocab_size_divisible_by",
                     config.make_ngram_vocab_size_divisible_by, 1, kMaxDivisor);
    if (text.has("seed")) config.seed = text.get_u64("seed");

    const json* eos = text.find("eos_token_id");
    if (eos != nullptr && eos->is_array()) {
        config.eos_token_ids = text.get_int_list("eos_token_id", 0, kMaxInt64);
    } else if (eos != nullptr && !eos->is_null()) {
        config.eos_token_ids.push_back(text.get_int("eos_token_id", 0, 0, kMaxInt64));
    }
    // Token ids below V also keep every n-gram product below 2^63 (§3.4).
    for (size_t index = 0; index < config.eos_token_ids.size(); ++index) {
        if (config.eos_token_ids[index] >= config.vocab_size) {
            const std::string field = eos->is_array()
                                          ? "eos_token_id[" + std::to_string(index) + "]"
                                          : std::string("eos_token_id");
            text.fail(field, std::to_string(config.eos_token_ids[index]) +
                                 " is not below vocab_size " + std::to_string(config.vocab_size));
        }
    }
}

void read_mtp(const FieldReader& text, Config& config) {
    config.mtp_num_hidden_layers =
        text.get_int("mtp_num_hidden_layers", config.mtp_num_hidden_layers, 0, kMaxMtpLayers);
    config.mtp_use_dedicated_embeddings =
        text.get_bool("mtp_use_dedicated_embeddings", config.mtp_use_dedicated_embeddings);
}

// Engine-side checks and RoPE-derived rules of §1.3, then the §1.4 derived values.
void validate_and_derive(const FieldReader& text, const std::string& factor_path, Config& config) {
    if (config.linear_num_value_heads % config.linear_num_key_heads != 0) {
        text.fail("linear_num_value_heads", std::to_string(config.linear_num_value_heads) +
                                                " is not a multiple of linear_num_key_heads " +
                                                std::to_string(config.linear_num_key_heads));
    }
    if (config.num_attention_heads % config.num_key_value_heads != 0) {
        text.fail("num_attention_heads", std::to_string(config.num_attention_heads) +
                                             " is not a multiple of num_key_value_heads " +
                                             std::to_string(config.num_key_value_heads));
    }
    // int(D · partial_rotary_factor), truncating like Python's int().
    config.rotary_dim = static_cast<int64_t>(static_cast<double>(config.head_dim) *
                                             config.rope.partial_rotary_factor);
    const std::string rotary = "rotary_dim " + std::to_string(config.rotary_dim) + " (head_dim " +
                               std::to_string(config.head_dim) + " x partial_rotary_factor)";
    if (config.rotary_dim % 2 != 0) fail_field(text.file(), factor_path, rotary + " is odd");
    if (config.rope.mrope_section) {
        int64_t sum = 0;
        for (int64_t section : *config.rope.mrope_section) sum += section;
        if (sum * 2 != config.rotary_dim) {
            fail_field(text.file(), text.path("rope_parameters.mrope_section"),
                       "sums to " + std::to_string(sum) + ", but " + rotary + " / 2 is " +
                           std::to_string(config.rotary_dim / 2));
        }
    }
    if (config.indexer) {
        if (config.rotary_dim > config.indexer->head_dim) {
            text.fail("indexer_head_dim",
                      std::to_string(config.indexer->head_dim) + " is smaller than " + rotary);
        }
        config.block_topk = config.indexer->budget / config.indexer->compress_ratio;
    }
    config.key_dim = config.linear_num_key_heads * config.linear_key_head_dim;
    config.value_dim = config.linear_num_value_heads * config.linear_value_head_dim;
    config.conv_dim = 2 * config.key_dim + config.value_dim;
    config.gqa_group = config.num_attention_heads / config.num_key_value_heads;
    config.gdn_head_ratio = config.linear_num_value_heads / config.linear_num_key_heads;
    config.n_ngram_heads = (config.ngram_size - 1) * config.heads_per_ngram;
    config.ngram_context_len = config.ngram_size - 1;
    config.ple_conv_state_len = (config.ple_conv_kernel_size - 1) * config.ngram_size;
    config.ple_layer_index.assign(static_cast<size_t>(config.num_hidden_layers), std::nullopt);
    if (!config.has_ple()) return;

    // PLE rules (§1.3), on the sorted and de-duplicated id list.
    if (config.n_ngram_heads <= 0) {
        text.fail("heads_per_ngram", "(ngram_size-1) x heads_per_ngram must be positive, got " +
                                         std::to_string(config.n_ngram_heads));
    }
    if (config.ple_embed_dim <= 0) {
        text.fail("ple_embed_dim", "must be positive, got " + std::to_string(config.ple_embed_dim));
    }
    if (config.ple_embed_dim % config.n_ngram_heads != 0) {
        text.fail("ple_embed_dim", std::to_string(config.ple_embed_dim) +
                                       " is not a multiple of (ngram_size-1) x heads_per_ngram " +
                                       std::to_string(config.n_ngram_heads));
    }
    config.ngram_head_dim = config.ple_embed_dim / config.n_ngram_heads;
    for (size_t rank = 0; rank < config.ple_layer_ids.size(); ++rank) {
        const int64_t id = config.ple_layer_ids[rank];
        if (id < 1 || id > config.num_hidden_layers) {
            text.fail("ple_layer_ids", "id " + std::to_string(id) + " is outside [1, " +
                                           std::to_string(config.num_hidden_layers) + "]");
        }
        const auto layer = static_cast<size_t>(id - 1);
        if (config.layer_types[layer] != LayerType::LinearAttention) {
            text.fail("ple_layer_ids", "id " + std::to_string(id) + " (layer " +
                                           std::to_string(layer) +
                                           ") is qwen_sparse_attention; PLE needs a "
                                           "linear_attention layer");
        }
        config.ple_layer_index[layer] = static_cast<int>(rank);
    }
    if (config.eos_token_ids.empty()) {
        text.fail("eos_token_id",
                  "must be set (an int or a non-empty list) when ple_layer_ids "
                  "is non-empty");
    }
    config.n_conv_states = 3;
}

Config parse_document(nlohmann::json document, const std::string& file_name);

}  // namespace

std::string_view layer_type_name(LayerType type) {
    switch (type) {
        case LayerType::LinearAttention: return "linear_attention";
        case LayerType::QwenSparseAttention: return "qwen_sparse_attention";
    }
    return "unknown";
}

std::string_view gate_activation_name(GateActivation act) {
    switch (act) {
        case GateActivation::Sigmoid: return "sigmoid";
        case GateActivation::Silu: return "silu";
    }
    return "unknown";
}

std::string_view config_form_name(ConfigForm form) {
    switch (form) {
        case ConfigForm::Nested: return "nested";
        case ConfigForm::Flat: return "flat";
    }
    return "unknown";
}

Config parse_config(std::string_view json_text, const std::string& file_name) {
    // Bounded nesting keeps the recursive copy and destruction of the document off the stack
    // limit; no real config nests deeper than a few levels.
    const json::parser_callback_t limit_depth = [&file_name](int depth, json::parse_event_t,
                                                             json&) {
        if (depth > kMaxJsonDepth) {
            throw_invalid(file_name + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels");
        }
        return true;
    };
    json document;
    try {
        document = json::parse(json_text.begin(), json_text.end(), limit_depth);
    } catch (const json::exception& e) {
        throw_invalid(file_name + ": not valid JSON: " + e.what());
    }
    return parse_document(std::move(document), file_name);
}

Config parse_config(const json& document, const std::string& file_name) {
    return parse_document(document, file_name);
}

namespace {

Config parse_document(json document, const std::string& file_name) {
    if (!document.is_object()) {
        throw_invalid(file_name + ": expected a JSON object at the top level, got " +
                      document.type_name());
    }
    Config config;
    const FieldReader root(document, "", file_name);
    read_identity(root, config);

    const json* nested = root.find("text_config");
    if (nested != nullptr && !nested->is_null()) {
        if (!nested->is_object()) {
            root.fail("text_config", std::string("expected an object, got ") + nested->type_name());
        }
        config.form = ConfigForm::Nested;
    } else if (root.find("hidden_size") != nullptr && root.find("num_hidden_layers") != nullptr) {
        config.form = ConfigForm::Flat;
    } else {
        root.fail("text_config",
                  "missing, and the top level has no hidden_size and "
                  "num_hidden_layers (not a text config either)");
    }
    const bool is_nested = config.form == ConfigForm::Nested;
    const FieldReader text = is_nested ? root.nested("text_config") : root;
    if (is_nested && text.has("model_type")) {
        const std::string inner = text.get_string("model_type", "");
        if (inner != "qwen4_exp_text" && inner != "qwen4_exp") {
            text.fail("model_type", "'" + inner + "' is not qwen4_exp_text",
                      ErrorKind::Unsupported);
        }
    }

    read_sizes(text, config);
    read_moe(text, config);
    const std::string factor_path = read_rope(text, config);
    read_layer_types(text, config);
    read_activations(text, config);
    read_indexer(text, config);
    read_ple(text, config);
    read_mtp(text, config);

    // §1.1: tie if either level says so; the nested split_ngram_parts wins.
    config.tie_word_embeddings = text.get_bool("tie_word_embeddings", false);
    if (is_nested) {
        config.tie_word_embeddings =
            root.get_bool("tie_word_embeddings", false) || config.tie_word_embeddings;
    }
    const FieldReader& split_source = (is_nested && !text.has("split_ngram_parts")) ? root : text;
    config.split_ngram_parts =
        split_source.get_int("split_ngram_parts", config.split_ngram_parts, 1, kMaxSplitParts);

    validate_and_derive(text, factor_path, config);

    if (is_nested) {
        collect_unrecognized(document, "", known_outer_keys(), config.unrecognized_keys);
        collect_unrecognized(document.at("text_config"), "text_config.", known_text_keys(),
                             config.unrecognized_keys);
    } else {
        std::set<std::string, std::less<>> flat_keys = known_text_keys();
        flat_keys.insert({"quantization", "quantization_config"});
        collect_unrecognized(document, "", flat_keys, config.unrecognized_keys);
    }
    std::sort(config.unrecognized_keys.begin(), config.unrecognized_keys.end());
    config.source = std::move(document);
    return config;
}

}  // namespace

}  // namespace cherenkov::model_data::qwen4_exp
