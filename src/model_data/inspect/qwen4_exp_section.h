// The qwen4_exp part of a checkpoint report: parsed and derived config, tensor roles, the
// checkpoint layout (prefix form, expert form, MTP, n-gram shards), summary lines and what
// preparation needs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_data/encodings/logical_tensor.h"

namespace cherenkov::model_data::inspect {

// True when config.json names a qwen4_exp model (model_type or architectures).
bool is_qwen4_exp_config(const nlohmann::json& config_document);

// {"config", "layout", "summary": [lines], "roles": {tensor or logical name: role},
//  "preparation"}. Throws InvalidInput / Unsupported for a config that fails validation, and
// Corrupt naming `location` when tensors are missing or have wrong shapes.
nlohmann::json describe_qwen4_exp(const nlohmann::json& config_document, const std::string& config_name,
                                  const std::vector<StoredTensor>& stored, const std::vector<LogicalTensor>& logical,
                                  const std::string& location);

}  // namespace cherenkov::model_data::inspect
