// Table-driven qwen4_exp tensor-name classification: a prefix, then a path looked up in one
// table per scope. "{e}" and "shard_{j}" stand for the expert and shard indices.
#include "model_data/qwen4_exp/tensor_roles.h"

#include <array>
#include <charconv>
#include <vector>

namespace cherenkov::model_data::qwen4_exp {

namespace {

enum class Scope { Global, Layer, MtpGlobal, Head };

struct RoleEntry {
    TensorRole role;
    Scope scope;
    std::string_view path;
    std::string_view name;
    bool bare;  // a parameter without `.weight`
};

using R = TensorRole;
using S = Scope;

// Every role's path relative to its scope's prefix, and its report name.
constexpr std::array kRoles = {
    RoleEntry{R::EmbedTokens, S::Global, "embed_tokens", "embed_tokens", false},
    RoleEntry{R::LmHead, S::Head, "lm_head", "lm_head", false},
    RoleEntry{R::FinalHcNorm, S::Global, "hyper_connection_mixer.hc_norm", "final_hc_norm", false},
    RoleEntry{R::FinalMixDown, S::Global, "hyper_connection_mixer.input_mix_weight_down",
              "final_mix_down", false},
    RoleEntry{R::FinalMixUp, S::Global, "hyper_connection_mixer.input_mix_weight_up",
              "final_mix_up", false},
    RoleEntry{R::AttnHcNorm, S::Layer, "attn_hyper_connection.hc_norm", "attn_hc_norm", false},
    RoleEntry{R::AttnHcMixDown, S::Layer, "attn_hyper_connection.input_mix_weight_down",
              "attn_hc_mix_down", false},
    RoleEntry{R::AttnHcMixUp, S::Layer, "attn_hyper_connection.input_mix_weight_up",
              "attn_hc_mix_up", false},
    RoleEntry{R::AttnHcBlockInject, S::Layer, "attn_hyper_connection.block_inject_weight",
              "attn_hc_block_inject", false},
    RoleEntry{R::MlpHcNorm, S::Layer, "mlp_hyper_connection.hc_norm", "mlp_hc_norm", false},
    RoleEntry{R::MlpHcMixDown, S::Layer, "mlp_hyper_connection.input_mix_weight_down",
              "mlp_hc_mix_down", false},
    RoleEntry{R::MlpHcMixUp, S::Layer, "mlp_hyper_connection.input_mix_weight_up", "mlp_hc_mix_up",
              false},
    RoleEntry{R::MlpHcBlockInject, S::Layer, "mlp_hyper_connection.block_inject_weight",
              "mlp_hc_block_inject", false},
    RoleEntry{R::GdnInProjQkv, S::Layer, "linear_attn.in_proj_qkv", "gdn_in_proj_qkv", false},
    RoleEntry{R::GdnInProjZ, S::Layer, "linear_attn.in_proj_z", "gdn_in_proj_z", false},
    RoleEntry{R::GdnInProjB, S::Layer, "linear_attn.in_proj_b", "gdn_in_proj_b", false},
    RoleEntry{R::GdnInProjA, S::Layer, "linear_attn.in_proj_a", "gdn_in_proj_a", false},
    RoleEntry{R::GdnConv1d, S::Layer, "linear_attn.conv1d", "gdn_conv1d", false},
    RoleEntry{R::GdnDtBias, S::Layer, "linear_attn.dt_bias", "gdn_dt_bias", true},
    RoleEntry{R::GdnALog, S::Layer, "linear_attn.A_log", "gdn_a_log", true},
    RoleEntry{R::GdnNorm, S::Layer, "linear_attn.norm", "gdn_norm", false},
    RoleEntry{R::GdnOutProj, S::Layer, "linear_attn.out_proj", "gdn_out_proj", false},
    RoleEntry{R::QsaQProj, S::Layer, "self_attn.q_proj", "qsa_q_proj", false},
    RoleEntry{R::QsaKProj, S::Layer, "self_attn.k_proj", "qsa_k_proj", false},
    RoleEntry{R::QsaVProj, S::Layer, "self_attn.v_proj", "qsa_v_proj", false},
    RoleEntry{R::QsaOProj, S::Layer, "self_attn.o_proj", "qsa_o_proj", false},
    RoleEntry{R::QsaQNorm, S::Layer, "self_attn.q_norm", "qsa_q_norm", false},
    RoleEntry{R::QsaKNorm, S::Layer, "self_attn.k_norm", "qsa_k_norm", false},
    RoleEntry{R::IndexerQkProj, S::Layer, "self_attn.indexer.index_qk_proj", "indexer_qk_proj",
              false},
    RoleEntry{R::IndexerQNorm, S::Layer, "self_attn.indexer.q_layernorm", "indexer_q_norm", false},
    RoleEntry{R::IndexerKNorm, S::Layer, "self_attn.indexer.k_layernorm", "indexer_k_norm", false},
    RoleEntry{R::Router, S::Layer, "mlp.gate", "router", false},
    RoleEntry{R::ExpertsGateUp, S::Layer, "mlp.experts.gate_up_proj", "experts_gate_up", true},
    RoleEntry{R::ExpertsDown, S::Layer, "mlp.experts.down_proj", "experts_down", true},
    RoleEntry{R::ExpertGate, S::Layer, "mlp.experts.{e}.gate_proj", "expert_gate", false},
    RoleEntry{R::ExpertUp, S::Layer, "mlp.experts.{e}.up_proj", "expert_up", false},
    RoleEntry{R::ExpertDown, S::Layer, "mlp.experts.{e}.down_proj", "expert_down", false},
    RoleEntry{R::SwitchGate, S::Layer, "mlp.switch_mlp.gate_proj", "switch_gate", false},
    RoleEntry{R::SwitchUp, S::Layer, "mlp.switch_mlp.up_proj", "switch_up", false},
    RoleEntry{R::SwitchDown, S::Layer, "mlp.switch_mlp.down_proj", "switch_down", false},
    RoleEntry{R::SharedExpertGateProj, S::Layer, "mlp.shared_expert.gate_proj",
              "shared_expert_gate_proj", false},
    RoleEntry{R::SharedExpertUpProj, S::Layer, "mlp.shared_expert.up_proj", "shared_expert_up_proj",
              false},
    RoleEntry{R::SharedExpertDownProj, S::Layer, "mlp.shared_expert.down_proj",
              "shared_expert_down_proj", false},
    RoleEntry{R::SharedExpertGate, S::Layer, "mlp.shared_expert_gate", "shared_expert_gate", false},
    RoleEntry{R::PleKeyProj, S::Layer, "ple.key_proj", "ple_key_proj", false},
    RoleEntry{R::PleValueProj, S::Layer, "ple.value_proj", "ple_value_proj", false},
    RoleEntry{R::PleNormKey, S::Layer, "ple.norm_key", "ple_norm_key", false},
    RoleEntry{R::PleNormQuery, S::Layer, "ple.norm_query", "ple_norm_query", false},
    RoleEntry{R::PleNormConv, S::Layer, "ple.norm_conv", "ple_norm_conv", false},
    RoleEntry{R::PleConv1d, S::Layer, "ple.conv1d", "ple_conv1d", false},
    RoleEntry{R::NgramShard, S::Layer, "ple.ple_embedding.ngram_embedding.shard_{j}", "ngram_shard",
              false},
    RoleEntry{R::NgramTable, S::Layer, "ple.ple_embedding.ngram_embedding", "ngram_table", false},
    RoleEntry{R::PleLayerMultipliers, S::Layer, "ple.ple_embedding.layer_multipliers",
              "ple_layer_multipliers", true},
    RoleEntry{R::PleHeadVocabSizes, S::Layer, "ple.ple_embedding.ngram_heads_vocab_sizes",
              "ple_head_vocab_sizes", true},
    RoleEntry{R::PleHeadOffsets, S::Layer, "ple.ple_embedding.ngram_heads_offsets",
              "ple_head_offsets", true},
    RoleEntry{R::PleWeightScale, S::Layer, "ple.ple_embedding.ngram_embedding.weight_scale",
              "ple_weight_scale", true},
    RoleEntry{R::MtpPreFcNormEmbedding, S::MtpGlobal, "pre_fc_norm_embedding",
              "mtp_pre_fc_norm_embedding", false},
    RoleEntry{R::MtpPreFcNormHidden, S::MtpGlobal, "pre_fc_norm_hidden", "mtp_pre_fc_norm_hidden",
              false},
    RoleEntry{R::MtpFcEmbedding, S::MtpGlobal, "fc_embedding", "mtp_fc_embedding", false},
    RoleEntry{R::MtpFcHidden, S::MtpGlobal, "fc_hidden", "mtp_fc_hidden", false},
    RoleEntry{R::MtpHcNorm, S::MtpGlobal, "hyper_connection_mixer.hc_norm", "mtp_hc_norm", false},
    RoleEntry{R::MtpMixDown, S::MtpGlobal, "hyper_connection_mixer.input_mix_weight_down",
              "mtp_mix_down", false},
    RoleEntry{R::MtpMixUp, S::MtpGlobal, "hyper_connection_mixer.input_mix_weight_up", "mtp_mix_up",
              false},
    RoleEntry{R::MtpEmbedTokens, S::MtpGlobal, "embed_tokens", "mtp_embed_tokens", false},
    RoleEntry{R::MtpLmHead, S::MtpGlobal, "shared_head.head", "mtp_lm_head", false},
};

const RoleEntry* entry_of(TensorRole role) {
    for (const RoleEntry& entry : kRoles) {
        if (entry.role == role) return &entry;
    }
    return nullptr;
}

const RoleEntry* find_entry(Scope scope, std::string_view path) {
    for (const RoleEntry& entry : kRoles) {
        if (entry.scope == scope && entry.path == path) return &entry;
    }
    return nullptr;
}

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A canonical non-negative decimal index (no sign, no leading zero), below 2^31.
bool parse_index(std::string_view text, int64_t& value) {
    if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) return false;
    for (char digit : text) {
        if (digit < '0' || digit > '9') return false;
    }
    int64_t parsed = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (result.ec != std::errc() || result.ptr != text.data() + text.size()) return false;
    if (parsed > 0x7fffffff) return false;
    value = parsed;
    return true;
}

std::vector<std::string_view> split_dots(std::string_view text) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (true) {
        const size_t dot = text.find('.', start);
        parts.push_back(text.substr(start, dot - start));
        if (dot == std::string_view::npos) return parts;
        start = dot + 1;
    }
}

// Why a name is deliberately unused (§2.1), or empty.
std::string_view ignore_reason(std::string_view name) {
    for (std::string_view visual : {"model.visual.", "visual.", "vision_tower.",
                                    "model.vision_tower.", "language_model.vision_tower."}) {
        if (starts_with(name, visual)) return "vision tower";
    }
    if (name == "rotary_emb.inv_freq" || ends_with(name, ".rotary_emb.inv_freq")) {
        return "rotary inv_freq (recomputed)";
    }
    if (name.find(".ple.ple_embedding.hashstats_") != std::string_view::npos) {
        return "PLE hash statistics";
    }
    if (name.find(".ple.ple_embedding.token_lookup") != std::string_view::npos) {
        return "PLE token lookup";
    }
    if (name.find("hyper_connection_mixer.block_inject_weight") != std::string_view::npos) {
        return "output mixer has no inject weight";
    }
    return {};
}

struct PrefixRule {
    std::string_view text;
    NamePrefix prefix;
    bool mtp;
};

// Longest first, so "model.mtp." wins over "model.".
constexpr std::array kPrefixRules = {
    PrefixRule{"model.language_model.", NamePrefix::ModelLanguageModel, false},
    PrefixRule{"language_model.model.", NamePrefix::LanguageModelModel, false},
    PrefixRule{"language_model.mtp.", NamePrefix::LanguageModelMtp, true},
    PrefixRule{"model.mtp.", NamePrefix::ModelMtp, true},
    PrefixRule{"mtp.", NamePrefix::Mtp, true},
    PrefixRule{"model.", NamePrefix::Model, false},
};

// Replaces index segments by placeholders: experts.<e> → experts.{e}, shard_<j> → shard_{j}.
std::string normalize_layer_path(const std::vector<std::string_view>& parts, size_t first,
                                 TensorAddress& address) {
    std::string path;
    for (size_t index = first; index < parts.size(); ++index) {
        std::string_view part = parts[index];
        std::string piece(part);
        int64_t value = 0;
        if (index > first && parts[index - 1] == "experts" && parse_index(part, value)) {
            address.expert = value;
            piece = "{e}";
        } else if (starts_with(part, "shard_") && parse_index(part.substr(6), value)) {
            address.shard = value;
            piece = "shard_{j}";
        }
        if (!path.empty()) path += '.';
        path += piece;
    }
    return path;
}

bool component_allowed(TensorRole role, TensorComponent component) {
    switch (component) {
        case TensorComponent::Weight: return true;
        case TensorComponent::Scales:
        case TensorComponent::Biases: return is_quantizable_role(role);
        case TensorComponent::Bias:
            return role == R::QsaQProj || role == R::QsaKProj || role == R::QsaVProj ||
                   role == R::QsaOProj;
    }
    return false;
}

}  // namespace

std::string_view name_prefix_text(NamePrefix prefix) {
    switch (prefix) {
        case NamePrefix::None: return "";
        case NamePrefix::ModelLanguageModel: return "model.language_model.";
        case NamePrefix::Model: return "model.";
        case NamePrefix::LanguageModelModel: return "language_model.model.";
        case NamePrefix::LmHead: return "lm_head.";
        case NamePrefix::LanguageModelLmHead: return "language_model.lm_head.";
        case NamePrefix::Mtp: return "mtp.";
        case NamePrefix::ModelMtp: return "model.mtp.";
        case NamePrefix::LanguageModelMtp: return "language_model.mtp.";
    }
    return "";
}

std::string_view tensor_role_name(TensorRole role) {
    if (role == R::Ignored) return "ignored";
    const RoleEntry* entry = entry_of(role);
    return entry == nullptr ? "unknown" : entry->name;
}

std::string_view tensor_component_name(TensorComponent component) {
    switch (component) {
        case TensorComponent::Weight: return "weight";
        case TensorComponent::Scales: return "scales";
        case TensorComponent::Biases: return "biases";
        case TensorComponent::Bias: return "bias";
    }
    return "unknown";
}

bool is_layer_role(TensorRole role) {
    const RoleEntry* entry = entry_of(role);
    return entry != nullptr && entry->scope == Scope::Layer;
}

bool is_quantizable_role(TensorRole role) {
    switch (role) {
        case R::EmbedTokens:
        case R::LmHead:
        case R::FinalMixDown:
        case R::FinalMixUp:
        case R::AttnHcMixDown:
        case R::AttnHcMixUp:
        case R::AttnHcBlockInject:
        case R::MlpHcMixDown:
        case R::MlpHcMixUp:
        case R::MlpHcBlockInject:
        case R::GdnInProjQkv:
        case R::GdnInProjZ:
        case R::GdnInProjB:
        case R::GdnInProjA:
        case R::GdnOutProj:
        case R::QsaQProj:
        case R::QsaKProj:
        case R::QsaVProj:
        case R::QsaOProj:
        case R::IndexerQkProj:
        case R::Router:
        case R::ExpertGate:
        case R::ExpertUp:
        case R::ExpertDown:
        case R::SwitchGate:
        case R::SwitchUp:
        case R::SwitchDown:
        case R::SharedExpertGateProj:
        case R::SharedExpertUpProj:
        case R::SharedExpertDownProj:
        case R::SharedExpertGate:
        case R::PleKeyProj:
        case R::PleValueProj:
        case R::NgramShard:
        case R::NgramTable:
        case R::MtpFcEmbedding:
        case R::MtpFcHidden:
        case R::MtpMixDown:
        case R::MtpMixUp:
        case R::MtpEmbedTokens:
        case R::MtpLmHead: return true;
        default: return false;
    }
}

TensorName classify_tensor(std::string_view name) {
    TensorName result;
    if (const std::string_view reason = ignore_reason(name); !reason.empty()) {
        result.address.role = R::Ignored;
        result.module = std::string(name);
        result.note = std::string(reason);
        return result;
    }
    // Component suffix; without one the name is a bare parameter.
    std::string_view module = name;
    bool bare = true;
    struct Suffix {
        std::string_view text;
        TensorComponent component;
    };
    for (const Suffix& suffix :
         {Suffix{".weight", TensorComponent::Weight}, Suffix{".scales", TensorComponent::Scales},
          Suffix{".biases", TensorComponent::Biases}, Suffix{".bias", TensorComponent::Bias}}) {
        if (ends_with(name, suffix.text)) {
            module = name.substr(0, name.size() - suffix.text.size());
            result.component = suffix.component;
            bare = false;
            break;
        }
    }
    result.module = std::string(module);

    const RoleEntry* entry = nullptr;
    if (module == "lm_head" || module == "language_model.lm_head") {
        result.prefix = module == "lm_head" ? NamePrefix::LmHead : NamePrefix::LanguageModelLmHead;
        entry = find_entry(Scope::Head, "lm_head");
    } else {
        const PrefixRule* rule = nullptr;
        for (const PrefixRule& candidate : kPrefixRules) {
            if (starts_with(module, candidate.text)) {
                rule = &candidate;
                break;
            }
        }
        if (rule == nullptr) return result;
        result.prefix = rule->prefix;
        result.address.mtp = rule->mtp;
        const auto parts = split_dots(module.substr(rule->text.size()));
        int64_t layer = 0;
        if (parts.size() > 2 && parts[0] == "layers" && parse_index(parts[1], layer)) {
            result.address.layer = layer;
            entry = find_entry(Scope::Layer, normalize_layer_path(parts, 2, result.address));
        } else {
            entry = find_entry(rule->mtp ? Scope::MtpGlobal : Scope::Global,
                               module.substr(rule->text.size()));
        }
    }
    if (entry == nullptr || entry->bare != bare ||
        !component_allowed(entry->role, result.component)) {
        result.address = TensorAddress{};
        return result;
    }
    result.address.role = entry->role;
    return result;
}

std::string tensor_name_of(const TensorAddress& address, NamePrefix prefix) {
    const RoleEntry* entry = entry_of(address.role);
    if (entry == nullptr) return "";
    if (entry->scope == Scope::Head) {
        return prefix == NamePrefix::LanguageModelModel ? "language_model.lm_head.weight"
                                                        : "lm_head.weight";
    }
    std::string name(name_prefix_text(prefix));
    if (entry->scope == Scope::Layer) name += "layers." + std::to_string(address.layer) + ".";
    std::string path(entry->path);
    if (const size_t at = path.find("{e}"); at != std::string::npos) {
        path.replace(at, 3, std::to_string(address.expert));
    }
    if (const size_t at = path.find("{j}"); at != std::string::npos) {
        path.replace(at, 3, std::to_string(address.shard));
    }
    name += path;
    if (!entry->bare) name += ".weight";
    return name;
}

}  // namespace cherenkov::model_data::qwen4_exp
