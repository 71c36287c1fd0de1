// What `prepare` needs to turn a qwen4_exp checkpoint into the packed 4-bit store, decided
// from the logical tensors and their roles (issue 4's conversion rules, seed "Prepare").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_data/encodings/logical_tensor.h"
#include "model_data/qwen4_exp/checkpoint_layout.h"

namespace cherenkov::model_data::inspect {

// {"supported": true, "source_format": "hf-bf16" | "mlx-affine", "steps": [...],
//  "bytes": {"routed_experts", "ngram_tables", "other", "estimated_store"}}.
// Throws Unsupported, naming `location` and the module, for encodings the packer cannot take:
// MLX main weights not in groups of 64, non-affine modes, FP8/FP4/FP6 weights.
nlohmann::json describe_preparation(const qwen4_exp::CheckpointLayout& layout, const std::vector<LogicalTensor>& logical,
                                    const std::string& location);

}  // namespace cherenkov::model_data::inspect
