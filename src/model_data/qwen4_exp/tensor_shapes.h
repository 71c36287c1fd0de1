// Expected shapes and dtypes of qwen4_exp tensor roles given a Config (docs/qwen4_exp.md §2,
// §6.2), for float tensors and for MLX-packed ones (docs/formats.md §2.2: U32 weight
// [..., out, in·bits/32], scales / biases [..., out, in/group]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model_data/qwen4_exp/config.h"
#include "model_data/qwen4_exp/tensor_roles.h"

namespace cherenkov::model_data::qwen4_exp {

inline constexpr int64_t kAnySize = -1;  // wildcard in an expected shape

// The accepted logical (unpacked) shapes of a role; conv1d has two ([C,1,K] HF, [C,K,1] MLX),
// the scalar weight_scale two ([] and [1]). Empty when the config has no such tensor
// (indexer without QSA fields, PLE roles without PLE) or the role has no fixed shape.
std::vector<std::vector<int64_t>> expected_shapes(const Config& config, TensorRole role);

struct ShapeVerdict {
    bool ok = true;
    bool packed_width_unchecked = false;  // U32 weight, bits unknown
    std::string message;                  // why not ok
};

// Checks one stored tensor (any component) against its role. `bits` is the module's MLX bit
// width when known.
ShapeVerdict check_shape(const Config& config, const TensorName& name, const std::string& dtype,
                         const std::vector<int64_t>& shape, std::optional<int> bits);

// Empty when `dtype` can hold this component of the role, else why not.
std::string check_dtype(const TensorName& name, const std::string& dtype);

bool is_float_dtype(const std::string& dtype);

std::string format_shape(const std::vector<int64_t>& shape);  // "[640, 2560]", "*" for any

}  // namespace cherenkov::model_data::qwen4_exp
