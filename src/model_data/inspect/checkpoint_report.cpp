#include "model_data/inspect/checkpoint_report.h"

#include <map>
#include <set>

#include "base/error.h"
#include "model_data/encodings/logical_tensor.h"
#include "model_data/encodings/quantization_config.h"
#include "model_data/inspect/qwen4_exp_section.h"
#include "model_data/safetensors/safetensors_checkpoint.h"

namespace cherenkov::model_data::inspect {
namespace {

using nlohmann::json;

json file_json(const SafetensorsFile& file, const std::string& display_name) {
    const SafetensorsHeader& header = file.header();
    return json{{"name", display_name},
                {"size", header.file_size},
                {"header_bytes", header.header_bytes},
                {"data_offset", header.data_offset},
                {"n_tensors", header.tensors.size()},
                {"metadata", header.metadata}};
}

json tensor_json(const SafetensorsFile& file, const TensorInfo& tensor, const std::string& display_name) {
    return json{{"name", tensor.name},
                {"file", display_name},
                {"dtype", dtype_name(tensor.dtype)},
                {"shape", tensor.shape},
                {"offset", file.header().file_begin(tensor)},
                {"end", file.header().file_end(tensor)},
                {"n_bytes", tensor.n_bytes()}};
}

std::string encoding_label(const LogicalTensor& logical) {
    if (logical.kind == EncodingKind::Dense) return std::string(dtype_name(logical.dtype));
    const QuantParams& params = logical.params;
    return "mlx-" + std::string(quant_mode_name(params.mode)) + "-q" + std::to_string(params.bits) + "-g" +
           std::to_string(params.group_size);
}

json logical_json(const LogicalTensor& logical) {
    json out{{"name", logical.name}, {"encoding", encoding_label(logical)}, {"shape", logical.shape}};
    if (logical.kind == EncodingKind::Dense) {
        out["dtype"] = dtype_name(logical.dtype);
        return out;
    }
    out["scales_dtype"] = dtype_name(logical.dtype);
    out["bits"] = logical.params.bits;
    out["group_size"] = logical.params.group_size;
    out["mode"] = quant_mode_name(logical.params.mode);
    out["parts"] = json{{"weight", logical.module + ".weight"}, {"scales", logical.scales_name}};
    if (!logical.biases_name.empty()) out["parts"]["biases"] = logical.biases_name;
    return out;
}

json quantization_json(const QuantizationConfig& quantization) {
    auto params_json = [](const QuantParams& params) {
        return json{{"bits", params.bits}, {"group_size", params.group_size}, {"mode", quant_mode_name(params.mode)}};
    };
    json overrides = json::object();
    for (const auto& [module, params] : quantization.overrides) {
        overrides[module] = params ? params_json(*params) : json(false);
    }
    return json{{"defaults", params_json(quantization.defaults)}, {"overrides", overrides}};
}

// The file name relative to the store, for display.
std::string relative_name(const std::string& full, const std::string& location) {
    if (full.rfind(location, 0) == 0 && full.size() > location.size() + 1) return full.substr(location.size() + 1);
    return full;
}

}  // namespace

json inspect_safetensors_file(std::shared_ptr<const ByteSource> source) {
    SafetensorsFile file = SafetensorsFile::open(std::move(source));
    json report{{"kind", "safetensors"}, {"path", file.name()}};
    report["files"] = json::array({file_json(file, file.name())});
    json tensors = json::array();
    std::map<std::string, uint64_t> bytes_by_dtype;
    uint64_t total_bytes = 0;
    for (const auto& tensor : file.tensors()) {
        tensors.push_back(tensor_json(file, tensor, file.name()));
        bytes_by_dtype[std::string(dtype_name(tensor.dtype))] += tensor.n_bytes();
        total_bytes += tensor.n_bytes();
    }
    report["tensors"] = std::move(tensors);
    report["totals"] = json{{"n_tensors", file.tensors().size()}, {"n_bytes", total_bytes}, {"bytes_by_dtype", bytes_by_dtype}};
    return report;
}

json inspect_checkpoint(const ObjectStore& store) {
    const std::string& location = store.location();
    json report{{"kind", "checkpoint"}, {"path", location}};

    json config_document;
    const std::string config_name = location + "/config.json";
    bool has_config = store.exists("config.json");
    if (has_config) {
        try {
            config_document = json::parse(store.read_text("config.json"));
        } catch (const json::exception& e) {
            throw_invalid(config_name + ": not valid JSON: " + e.what());
        }
        if (!config_document.is_object()) throw_invalid(config_name + ": expected a JSON object");
    }

    SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(store);
    json files = json::array();
    json tensors = json::array();
    std::vector<StoredTensor> stored;
    std::map<std::string, uint64_t> bytes_by_dtype;
    uint64_t total_bytes = 0;
    for (const auto& file : checkpoint.files()) {
        std::string display = relative_name(file.name(), location);
        files.push_back(file_json(file, display));
        for (const auto& tensor : file.tensors()) {
            tensors.push_back(tensor_json(file, tensor, display));
            stored.push_back(StoredTensor{tensor.name, tensor.dtype, tensor.shape});
            bytes_by_dtype[std::string(dtype_name(tensor.dtype))] += tensor.n_bytes();
            total_bytes += tensor.n_bytes();
        }
    }
    report["files"] = std::move(files);
    if (const auto& index = checkpoint.index()) {
        report["index"] = json{{"file", kShardIndexName}, {"n_shards", index->shard_names.size()}};
        report["index"]["total_size"] = index->total_size ? json(*index->total_size) : json(nullptr);
    } else {
        report["index"] = nullptr;
    }
    report["warnings"] = checkpoint.warnings();
    report["totals"] = json{{"n_tensors", checkpoint.n_tensors()}, {"n_bytes", total_bytes}, {"bytes_by_dtype", bytes_by_dtype}};

    std::optional<QuantizationConfig> quantization;
    if (has_config) quantization = parse_quantization_config(config_document, config_name);
    report["quantization"] = quantization ? quantization_json(*quantization) : json(nullptr);
    std::vector<LogicalTensor> logical = assemble_logical_tensors(stored, quantization, location);

    report["config"] = has_config ? config_document : json(nullptr);
    std::string model_type = config_document.is_object() ? config_document.value("model_type", "") : "";
    report["model_type"] = model_type;
    json section = describe_qwen4_exp(config_document, config_name, stored, logical, location);
    bool is_qwen4_exp = !section.is_null();

    // Roles are attached to every stored and logical tensor when the architecture is known.
    std::map<std::string, std::string> role_of;
    if (is_qwen4_exp) role_of = section["roles"].get<std::map<std::string, std::string>>();
    for (auto& tensor : tensors) {
        auto it = role_of.find(tensor["name"].get<std::string>());
        if (it != role_of.end()) tensor["role"] = it->second;
    }
    json logical_list = json::array();
    for (const auto& entry : logical) {
        json item = logical_json(entry);
        auto it = role_of.find(entry.name);
        if (it != role_of.end()) item["role"] = it->second;
        logical_list.push_back(std::move(item));
    }
    report["tensors"] = std::move(tensors);
    report["logical_tensors"] = std::move(logical_list);
    if (is_qwen4_exp) {
        report["preparation"] = std::move(section["preparation"]);
        section.erase("roles");
        section.erase("preparation");
        report["qwen4_exp"] = std::move(section);
    } else {
        report["qwen4_exp"] = nullptr;
        std::string reason = has_config ? "model_type '" + model_type + "' is not qwen4_exp: inspection only"
                                        : "no config.json: inspection only";
        report["preparation"] = json{{"supported", false}, {"reasons", json::array({reason})}};
    }
    return report;
}

}  // namespace cherenkov::model_data::inspect
