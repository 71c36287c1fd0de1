// Logical tensors: what a checkpoint's stored tensors mean. A dense tensor is itself; an
// MLX-quantized module is assembled from `<module>.weight` (packed codes), `.scales` and
// `.biases`, with bits and group size from config.json checked against the shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model_data/encodings/quantization_config.h"
#include "model_data/safetensors/dtype.h"

namespace cherenkov::model_data {

// The stored facts the assembly needs about one tensor (container independent).
struct StoredTensor {
    std::string name;
    Dtype dtype = Dtype::U8;
    std::vector<uint64_t> shape;
};

enum class EncodingKind { Dense, MlxQuantized };

struct LogicalTensor {
    std::string name;  // the weight's name, e.g. "model.layers.0.mlp.gate.weight"
    EncodingKind kind = EncodingKind::Dense;
    std::vector<uint64_t> shape;  // logical (dequantized) shape
    Dtype dtype = Dtype::U8;      // dense: the stored dtype; quantized: the scales' dtype

    // MLX-quantized only.
    std::string module;  // name without ".weight"
    QuantParams params;
    std::string scales_name;
    std::string biases_name;  // empty for modes without biases (mxfp*, nvfp4)
};

// Groups `tensors` into logical tensors. Throws Corrupt (naming `source_name`, the module and
// the shapes) when a quantized module's parts are missing or disagree with its parameters, and
// InvalidInput when `.scales` exist but `quantization` is absent.
std::vector<LogicalTensor> assemble_logical_tensors(const std::vector<StoredTensor>& tensors,
                                                    const std::optional<QuantizationConfig>& quantization,
                                                    const std::string& source_name);

}  // namespace cherenkov::model_data
