// A local checkpoint opened for packing: config, safetensors tensors, the qwen4_exp layout and,
// for MLX conversions, the quantization parameters. Row-sliced reads of any stored tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model_data/encodings/quantization_config.h"
#include "model_data/qwen4_exp/checkpoint_layout.h"
#include "model_data/qwen4_exp/config.h"
#include "model_data/safetensors/safetensors_checkpoint.h"
#include "model_data/sources/byte_source.h"

namespace cherenkov::store {

// Rows [first_row, first_row + n_rows) of a stored tensor viewed as [total_rows, row_bytes]
// (all leading dims flattened; a 1-D tensor is one row).
struct RowSlice {
    const model_data::SafetensorsFile* file = nullptr;
    const model_data::TensorInfo* info = nullptr;
    uint64_t first_row = 0;
    uint64_t n_rows = 0;
    uint64_t row_bytes = 0;

    uint64_t n_bytes() const { return n_rows * row_bytes; }
    // Reads rows [begin, begin + out.size() / row_bytes) of this slice.
    void read_rows(uint64_t begin, std::span<std::byte> out) const;
};

struct SourceModel {
    std::string path;
    std::unique_ptr<model_data::ObjectStore> store;
    std::unique_ptr<model_data::SafetensorsCheckpoint> checkpoint;
    nlohmann::json config_document;
    model_data::qwen4_exp::Config config;
    model_data::qwen4_exp::CheckpointLayout layout;
    std::optional<model_data::QuantizationConfig> quantization;
    bool mlx = false;          // MLX affine conversion (packed weights present)
    uint64_t total_bytes = 0;  // Σ tensor bytes

    // The manifest's source kind: "mlx-affine" or "hf-bf16".
    const char* kind() const { return mlx ? "mlx-affine" : "hf-bf16"; }

    // The stored tensor with this exact name; throws NotFound naming the source.
    model_data::LocatedTensor require(const std::string& name) const;
    std::optional<model_data::LocatedTensor> find(const std::string& name) const;
};

// Opens and checks a local checkpoint directory. Throws when it is not a loadable qwen4_exp
// checkpoint (require_loadable) or the config is invalid.
SourceModel open_source_model(const std::string& directory);

RowSlice row_slice(const model_data::LocatedTensor& tensor, uint64_t first_row, uint64_t n_rows);
RowSlice whole_tensor(const model_data::LocatedTensor& tensor);
uint64_t total_rows(const model_data::TensorInfo& info);

}  // namespace cherenkov::store
