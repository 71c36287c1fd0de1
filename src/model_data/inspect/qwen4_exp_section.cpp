#include "model_data/inspect/qwen4_exp_section.h"

#include <map>
#include <sstream>

#include "model_data/inspect/preparation.h"
#include "model_data/qwen4_exp/checkpoint_layout.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::model_data::inspect {
namespace {

using nlohmann::json;
namespace q4 = qwen4_exp;

std::string role_label(const q4::TensorName& name) {
    std::string label(q4::tensor_role_name(name.address.role));
    if (name.address.mtp) label = "mtp." + label;
    if (name.address.layer >= 0) label += " layer " + std::to_string(name.address.layer);
    if (name.address.expert >= 0) label += " expert " + std::to_string(name.address.expert);
    if (name.address.shard >= 0) label += " shard " + std::to_string(name.address.shard);
    if (name.component != q4::TensorComponent::Weight) label += " (" + std::string(q4::tensor_component_name(name.component)) + ")";
    return label;
}

std::vector<std::string> summary_lines(const q4::Config& config, const q4::CheckpointLayout& layout) {
    std::vector<std::string> lines;
    std::ostringstream line;
    line << "model:       qwen4_exp (" << (config.architecture.empty() ? config.model_type : config.architecture) << "), "
         << q4::config_form_name(config.form) << " config, " << q4::name_prefix_text(layout.trunk_prefix) << " names";
    lines.push_back(line.str());

    size_t n_linear = 0;
    for (auto type : config.layer_types) n_linear += type == q4::LayerType::LinearAttention ? 1 : 0;
    line.str("");
    line << "             " << config.num_hidden_layers << " layers (" << n_linear << " gated deltanet, "
         << config.layer_types.size() - n_linear << " sparse attention), hidden " << config.hidden_size << " x "
         << config.hc_count << " streams, vocab " << config.vocab_size;
    lines.push_back(line.str());

    line.str("");
    line << "             experts: " << config.num_experts << " routed (top-" << config.num_experts_per_tok
         << ", intermediate " << config.moe_intermediate_size << ") + shared (" << config.shared_expert_intermediate_size
         << "), " << q4::expert_form_name(layout.expert_form) << " form";
    lines.push_back(line.str());

    line.str("");
    if (layout.ple_layers.empty()) {
        line << "             PLE: none";
    } else {
        line << "             PLE: layers";
        for (int64_t id : config.ple_layer_ids) line << ' ' << id;
        line << " (one-indexed); n-gram tables " << config.ngram_head_dim << " wide:";
        for (const auto& ple : layout.ple_layers) line << ' ' << ple.rows << " rows in " << ple.shards.size() << " shards";
    }
    lines.push_back(line.str());

    line.str("");
    line << "             MTP: ";
    if (layout.mtp.present) {
        line << layout.mtp.layers.size() << " layer(s), " << q4::name_prefix_text(layout.mtp.prefix) << " names";
    } else {
        line << "none (drafting disabled)";
    }
    line << "; norms: " << q4::norm_convention_name(layout.norm_convention);
    lines.push_back(line.str());
    return lines;
}

}  // namespace

bool is_qwen4_exp_config(const json& config_document) {
    if (!config_document.is_object()) return false;
    auto model_type_is = [](const json& object) {
        if (!object.is_object()) return false;
        auto it = object.find("model_type");
        return it != object.end() && it->is_string() &&
               (it->get<std::string>() == "qwen4_exp" || it->get<std::string>() == "qwen4_exp_text");
    };
    if (model_type_is(config_document)) return true;
    if (auto text = config_document.find("text_config"); text != config_document.end() && model_type_is(*text)) return true;
    if (auto architectures = config_document.find("architectures"); architectures != config_document.end() && architectures->is_array()) {
        for (const auto& name : *architectures) {
            if (name.is_string() && name.get<std::string>().rfind("Qwen4Exp", 0) == 0) return true;
        }
    }
    return false;
}

json describe_qwen4_exp(const json& config_document, const std::string& config_name, const std::vector<StoredTensor>& stored,
                        const std::vector<LogicalTensor>& logical, const std::string& location) {
    if (!is_qwen4_exp_config(config_document)) return nullptr;
    q4::Config config = q4::parse_config(config_document, config_name);

    std::vector<q4::TensorEntry> entries;
    entries.reserve(stored.size());
    for (const auto& tensor : stored) {
        entries.push_back(q4::TensorEntry{tensor.name, std::string(dtype_name(tensor.dtype)),
                                          std::vector<int64_t>(tensor.shape.begin(), tensor.shape.end())});
    }
    std::map<std::string, int, std::less<>> bits_by_module;
    for (const auto& tensor : logical) {
        if (tensor.kind == EncodingKind::MlxQuantized) bits_by_module[tensor.module] = tensor.params.bits;
    }
    q4::LayoutOptions options;
    options.bits_of = [&bits_by_module](std::string_view module) -> std::optional<int> {
        auto it = bits_by_module.find(module);
        if (it == bits_by_module.end()) return std::nullopt;
        return it->second;
    };
    q4::CheckpointLayout layout = q4::describe_layout(config, entries, options);
    q4::require_loadable(layout, location);

    json roles = json::object();
    for (const auto& tensor : layout.tensors) roles[tensor.entry.name] = role_label(tensor.name);
    for (const auto& tensor : logical) {
        if (!roles.contains(tensor.name)) roles[tensor.name] = role_label(q4::classify_tensor(tensor.name));
    }
    json summary = summary_lines(config, layout);
    return json{{"config", q4::config_to_json(config)},
                {"layout", q4::layout_to_json(layout)},
                {"summary", summary},
                {"roles", roles},
                {"preparation", describe_preparation(layout, logical, location)}};
}

}  // namespace cherenkov::model_data::inspect
