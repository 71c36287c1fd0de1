#include "model_data/encodings/logical_tensor.h"

#include <map>
#include <set>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

constexpr std::string_view kScalesSuffix = ".scales";

bool ends_with(const std::string& text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string text = "[";
    for (size_t axis = 0; axis < shape.size(); ++axis) {
        if (axis) text += ", ";
        text += std::to_string(shape[axis]);
    }
    return text + "]";
}

LogicalTensor assemble_quantized(const std::string& module, const std::map<std::string, const StoredTensor*>& by_name,
                                 const QuantParams& params, const std::string& where) {
    const StoredTensor* weight = by_name.count(module + ".weight") ? by_name.at(module + ".weight") : nullptr;
    const StoredTensor* scales = by_name.at(module + ".scales");
    const StoredTensor* biases = by_name.count(module + ".biases") ? by_name.at(module + ".biases") : nullptr;
    if (weight == nullptr) throw_corrupt(where + ": has " + module + ".scales but no " + module + ".weight");

    bool affine = params.mode == QuantMode::Affine;
    if (affine && biases == nullptr) throw_corrupt(where + ": affine module " + module + " has no .biases");
    if (!affine && biases != nullptr) {
        throw_corrupt(where + ": " + std::string(quant_mode_name(params.mode)) + " module " + module + " has .biases");
    }
    if (weight->dtype != Dtype::U32) {
        throw_corrupt(where + ": " + module + ".weight is " + std::string(dtype_name(weight->dtype)) +
                      ", packed MLX codes are U32");
    }
    if (weight->shape.size() < 2 || scales->shape.size() != weight->shape.size()) {
        throw_corrupt(where + ": " + module + ": weight " + shape_text(weight->shape) + " and scales " +
                      shape_text(scales->shape) + " do not have the same rank (>= 2)");
    }
    if (biases != nullptr && biases->shape != scales->shape) {
        throw_corrupt(where + ": " + module + ": biases " + shape_text(biases->shape) + " differ from scales " +
                      shape_text(scales->shape));
    }
    size_t rank = weight->shape.size();
    for (size_t axis = 0; axis + 1 < rank; ++axis) {
        if (weight->shape[axis] != scales->shape[axis]) {
            throw_corrupt(where + ": " + module + ": weight " + shape_text(weight->shape) + " and scales " +
                          shape_text(scales->shape) + " differ outside the last axis");
        }
    }
    uint64_t packed_words = weight->shape[rank - 1];
    uint64_t n_groups = scales->shape[rank - 1];
    uint64_t in_from_codes = packed_words * 32 / static_cast<uint64_t>(params.bits);
    uint64_t in_from_groups = n_groups * static_cast<uint64_t>(params.group_size);
    if ((packed_words * 32) % static_cast<uint64_t>(params.bits) != 0 || in_from_codes != in_from_groups) {
        throw_corrupt(where + ": " + module + ": " + std::to_string(params.bits) + "-bit codes " +
                      shape_text(weight->shape) + " hold " + std::to_string(in_from_codes) + " columns but " +
                      std::to_string(n_groups) + " groups of " + std::to_string(params.group_size) + " hold " +
                      std::to_string(in_from_groups) + " (bits or group size disagree with config.json)");
    }

    LogicalTensor logical;
    logical.name = module + ".weight";
    logical.kind = EncodingKind::MlxQuantized;
    logical.shape = weight->shape;
    logical.shape[rank - 1] = in_from_codes;
    logical.dtype = scales->dtype;
    logical.module = module;
    logical.params = params;
    logical.scales_name = scales->name;
    logical.biases_name = biases ? biases->name : "";
    return logical;
}

}  // namespace

std::vector<LogicalTensor> assemble_logical_tensors(const std::vector<StoredTensor>& tensors,
                                                    const std::optional<QuantizationConfig>& quantization,
                                                    const std::string& source_name) {
    std::map<std::string, const StoredTensor*> by_name;
    for (const auto& tensor : tensors) by_name.emplace(tensor.name, &tensor);

    std::set<std::string> consumed;
    std::vector<LogicalTensor> logical;
    for (const auto& tensor : tensors) {
        if (!ends_with(tensor.name, kScalesSuffix)) continue;
        std::string module = tensor.name.substr(0, tensor.name.size() - kScalesSuffix.size());
        if (!quantization) {
            throw_invalid(source_name + ": " + tensor.name +
                          " exists but config.json has no `quantization` (bits and group size unknown)");
        }
        auto params = quantization->params_for(module);
        if (!params) {
            throw_corrupt(source_name + ": " + module + " has .scales but config.json quantization." + module +
                          " is false");
        }
        logical.push_back(assemble_quantized(module, by_name, *params, source_name));
        consumed.insert(module + ".weight");
        consumed.insert(module + ".scales");
        consumed.insert(module + ".biases");
    }
    for (const auto& tensor : tensors) {
        if (consumed.count(tensor.name)) continue;
        LogicalTensor dense;
        dense.name = tensor.name;
        dense.kind = EncodingKind::Dense;
        dense.shape = tensor.shape;
        dense.dtype = tensor.dtype;
        logical.push_back(std::move(dense));
    }
    return logical;
}

}  // namespace cherenkov::model_data
