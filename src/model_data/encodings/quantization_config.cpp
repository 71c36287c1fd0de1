#include "model_data/encodings/quantization_config.h"

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

using nlohmann::json;

QuantMode parse_mode(const json& value, const std::string& where) {
    if (!value.is_string()) throw_invalid(where + ": expected a string");
    const auto& text = value.get_ref<const std::string&>();
    if (text == "affine") return QuantMode::Affine;
    if (text == "mxfp4") return QuantMode::Mxfp4;
    if (text == "mxfp8") return QuantMode::Mxfp8;
    if (text == "nvfp4") return QuantMode::Nvfp4;
    throw_unsupported(where + ": unknown quantization mode '" + text + "'");
}

int parse_positive_int(const json& value, const std::string& where) {
    if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > 1024) {
        throw_invalid(where + ": expected a positive integer, got " + value.dump());
    }
    return static_cast<int>(value.get<int64_t>());
}

// Fills `params` from the keys of `object` that are present; other keys are left as given.
void read_params(const json& object, QuantParams& params, const std::string& where) {
    if (auto it = object.find("bits"); it != object.end()) params.bits = parse_positive_int(*it, where + ".bits");
    if (auto it = object.find("group_size"); it != object.end()) {
        params.group_size = parse_positive_int(*it, where + ".group_size");
    }
    if (auto it = object.find("mode"); it != object.end()) params.mode = parse_mode(*it, where + ".mode");
    if (params.mode == QuantMode::Affine) {
        int bits = params.bits;
        if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8) {
            throw_invalid(where + ".bits: " + std::to_string(bits) + " is not an MLX affine width (2, 3, 4, 5, 6, 8)");
        }
        int group = params.group_size;
        if (group != 32 && group != 64 && group != 128) {
            throw_invalid(where + ".group_size: " + std::to_string(group) + " is not an MLX group size (32, 64, 128)");
        }
    }
}

bool is_parameter_key(const std::string& key) { return key == "bits" || key == "group_size" || key == "mode"; }

}  // namespace

std::string_view quant_mode_name(QuantMode mode) {
    switch (mode) {
        case QuantMode::Affine: return "affine";
        case QuantMode::Mxfp4: return "mxfp4";
        case QuantMode::Mxfp8: return "mxfp8";
        case QuantMode::Nvfp4: return "nvfp4";
    }
    return "affine";
}

std::optional<QuantParams> QuantizationConfig::params_for(std::string_view module_path) const {
    auto it = overrides.find(std::string(module_path));
    if (it == overrides.end()) return defaults;
    return it->second;
}

std::optional<QuantizationConfig> parse_quantization_config(const json& config, const std::string& file_name) {
    const char* key = "quantization";
    auto it = config.find(key);
    if (it == config.end()) {
        key = "quantization_config";
        it = config.find(key);
        if (it == config.end()) return std::nullopt;
        // HF-native quantized checkpoints (awq, gptq, fp8...) use quant_method: not MLX.
        if (it->is_object() && it->contains("quant_method")) return std::nullopt;
    }
    const std::string where = file_name + ": " + key;
    if (!it->is_object()) throw_invalid(where + ": expected an object");

    QuantizationConfig parsed;
    read_params(*it, parsed.defaults, where);
    for (const auto& [entry_key, value] : it->items()) {
        if (is_parameter_key(entry_key)) continue;
        const std::string entry_where = where + "." + entry_key;
        if (value.is_boolean()) {
            if (value.get<bool>()) throw_invalid(entry_where + ": only false or an object is meaningful");
            parsed.overrides.emplace(entry_key, std::nullopt);
            continue;
        }
        if (!value.is_object()) throw_invalid(entry_where + ": expected an object or false");
        // Overrides usually omit `mode` (affine) but inherit nothing else implicitly in mlx-lm
        // except what they leave out, which comes from the defaults.
        QuantParams params = parsed.defaults;
        params.mode = QuantMode::Affine;
        read_params(value, params, entry_where);
        parsed.overrides.emplace(entry_key, params);
    }
    return parsed;
}

}  // namespace cherenkov::model_data
