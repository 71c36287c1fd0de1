// MLX quantization parameters from config.json (docs/formats.md §3.2): `quantization` (or the
// identical `quantization_config`) holds global bits / group_size / mode and per-module
// overrides (a dict of parameters, or false for "not quantized").
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace cherenkov::model_data {

enum class QuantMode { Affine, Mxfp4, Mxfp8, Nvfp4 };

std::string_view quant_mode_name(QuantMode mode);

struct QuantParams {
    int bits = 4;
    int group_size = 64;
    QuantMode mode = QuantMode::Affine;
};

struct QuantizationConfig {
    QuantParams defaults;
    // Module path (no ".weight") -> its parameters, or nullopt for an explicit `false`.
    std::map<std::string, std::optional<QuantParams>> overrides;

    // Parameters for a module whose `.scales` exist (mlx-lm's load rule): its override when
    // present, else the defaults. Returns nullopt when the override says "not quantized".
    std::optional<QuantParams> params_for(std::string_view module_path) const;
};

// Reads `quantization`, falling back to `quantization_config`, from a config.json object
// (the top level, not text_config). Returns nullopt when neither is present or the legacy
// HF `quantization_config` has a `quant_method` (not an MLX config). Errors name `file_name`
// and the key.
std::optional<QuantizationConfig> parse_quantization_config(const nlohmann::json& config,
                                                            const std::string& file_name);

}  // namespace cherenkov::model_data
