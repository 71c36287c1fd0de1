// layout_to_json: the checkpoint layout summary for `inspect --json`.
#include <map>

#include "model_data/qwen4_exp/checkpoint_layout.h"

namespace cherenkov::model_data::qwen4_exp {

namespace {

using nlohmann::json;

json prefix_json(NamePrefix prefix) {
    if (prefix == NamePrefix::None) return nullptr;
    return name_prefix_text(prefix);
}

json ple_layer_json(const PleLayerLayout& ple) {
    json shards = json::array();
    for (const NgramShardInfo& shard : ple.shards) {
        shards.push_back({{"shard", shard.shard},
                          {"name", shard.name},
                          {"row_offset", shard.row_offset},
                          {"rows", shard.rows}});
    }
    return {
        {"layer", ple.layer},
        {"ple_layer_index", ple.ple_layer_index},
        {"concatenated", ple.concatenated},
        {"n_shards", ple.shards.size()},
        {"rows", ple.rows},
        {"expected_rows", ple.expected_rows},
        {"shards", std::move(shards)},
        {"has_layer_multipliers", ple.has_layer_multipliers},
        {"has_head_vocab_sizes", ple.has_head_vocab_sizes},
        {"has_head_offsets", ple.has_head_offsets},
        {"has_weight_scale", ple.has_weight_scale},
    };
}

json mtp_json(const MtpLayout& mtp) {
    return {
        {"declared_layers", mtp.declared_layers},
        {"present", mtp.present},
        {"prefix", mtp.present ? prefix_json(mtp.prefix) : json(nullptr)},
        {"layers", mtp.layers},
        {"expert_form", expert_form_name(mtp.expert_form)},
        {"dedicated_embeddings", mtp.dedicated_embeddings},
    };
}

}  // namespace

json layout_to_json(const CheckpointLayout& layout) {
    std::map<std::string, int64_t> role_counts;
    for (const LayoutTensor& tensor : layout.tensors) {
        ++role_counts[std::string(tensor_role_name(tensor.name.address.role))];
    }
    json ple_layers = json::array();
    for (const PleLayerLayout& ple : layout.ple_layers) ple_layers.push_back(ple_layer_json(ple));
    json problems = json::array();
    for (const LayoutProblem& problem : layout.problems) {
        problems.push_back({{"kind", problem_kind_name(problem.kind)},
                            {"tensor", problem.tensor},
                            {"message", problem.message}});
    }
    return {
        {"ok", layout.ok()},
        {"n_tensors", layout.tensors.size()},
        {"trunk_prefix", prefix_json(layout.trunk_prefix)},
        {"head_prefix", prefix_json(layout.head_prefix)},
        {"expert_form", expert_form_name(layout.expert_form)},
        {"conv_layout", conv_layout_name(layout.conv_layout)},
        {"norm_convention", norm_convention_name(layout.norm_convention)},
        {"layout_signals", layout.layout_signals},
        {"quantized", layout.quantized},
        {"lm_head_tied", layout.lm_head_tied},
        {"role_counts", role_counts},
        {"ple_layers", std::move(ple_layers)},
        {"mtp", mtp_json(layout.mtp)},
        {"missing", layout.missing},
        {"unknown", layout.unknown},
        {"ignored", layout.ignored},
        {"unchecked", layout.unchecked},
        {"problems", std::move(problems)},
        {"notes", layout.notes},
    };
}

}  // namespace cherenkov::model_data::qwen4_exp
