// `cherenkov inspect PATH`: decides what PATH is (checkpoint directory, remote checkpoint URL,
// safetensors file, GGUF file) and produces its report in both forms.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model_data/sources/http_source.h"

namespace cherenkov::model_data::inspect {

struct InspectOutput {
    nlohmann::json report;  // the complete machine-readable form
    std::string text;       // the readable report
};

// `target` is a local path or an http(s) URL (a checkpoint base URL, or a .safetensors file).
InspectOutput inspect_target(const std::string& target, const HttpOptions& http_options);

}  // namespace cherenkov::model_data::inspect
