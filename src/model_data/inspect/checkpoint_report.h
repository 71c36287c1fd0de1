// `inspect` reports for safetensors inputs: a checkpoint (local directory or remote base URL)
// or a single .safetensors file. The report is one JSON document (the complete machine-readable
// form of `inspect --json`); report_text.h renders it for people.
#pragma once

#include <nlohmann/json.hpp>

#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data::inspect {

// Describes a checkpoint: containers, tensors with byte ranges, logical tensors and their
// encodings, and, for qwen4_exp, the parsed config, tensor roles and what preparation needs.
// Throws Unsupported when a qwen4_exp checkpoint cannot be prepared (for example MLX main
// weights in groups of 32), InvalidInput for an invalid config, Corrupt for broken containers.
nlohmann::json inspect_checkpoint(const ObjectStore& store);

// Describes one safetensors file on its own (no config).
nlohmann::json inspect_safetensors_file(std::shared_ptr<const ByteSource> source);

}  // namespace cherenkov::model_data::inspect
