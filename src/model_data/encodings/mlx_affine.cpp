#include "model_data/encodings/mlx_affine.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

float round_value(float value, MlxRounding rounding) {
    return rounding == MlxRounding::Gpu ? std::round(value) : std::rint(value);
}

void put_code(std::vector<uint8_t>& codes, int bits, size_t k, uint32_t code) {
    size_t bit = k * static_cast<size_t>(bits);
    for (int offset = 0; offset < bits; ++offset, ++bit) {
        if ((code >> offset) & 1u) codes[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
    }
}

}  // namespace

void dequantize_mlx_row(std::span<const uint8_t> codes, std::span<const float> scales,
                        std::span<const float> biases, int bits, int group_size, std::span<float> out) {
    CHERENKOV_ASSERT(codes.size() * 8 >= out.size() * static_cast<size_t>(bits), "code bytes cover the row");
    CHERENKOV_ASSERT(scales.size() * static_cast<size_t>(group_size) >= out.size(), "a scale per group");
    for (size_t k = 0; k < out.size(); ++k) {
        size_t group = k / static_cast<size_t>(group_size);
        out[k] = scales[group] * static_cast<float>(mlx_code(codes, bits, k)) + biases[group];
    }
}

QuantizedRow quantize_mlx_row(std::span<const float> row, int bits, int group_size, MlxRounding rounding) {
    CHERENKOV_ASSERT(row.size() % static_cast<size_t>(group_size) == 0, "row is whole groups");
    const float n_bins = static_cast<float>((1u << bits) - 1);
    const float eps = 1e-7f;
    QuantizedRow result;
    size_t n_groups = row.size() / static_cast<size_t>(group_size);
    result.codes.assign(mlx_packed_bytes(row.size(), bits), 0);
    result.scales.resize(n_groups);
    result.biases.resize(n_groups);
    for (size_t group = 0; group < n_groups; ++group) {
        auto values = row.subspan(group * static_cast<size_t>(group_size), static_cast<size_t>(group_size));
        float wmin = *std::min_element(values.begin(), values.end());
        float wmax = *std::max_element(values.begin(), values.end());
        if (rounding == MlxRounding::Gpu) wmax = std::max(wmax, 0.0f);
        float scale0 = std::max((wmax - wmin) / n_bins, eps);
        bool side = std::fabs(wmin) > std::fabs(wmax);
        if (!side) scale0 = -scale0;
        float edge = side ? wmin : wmax;
        float q0 = round_value(edge / scale0, rounding);
        float scale = scale0;
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        result.scales[group] = scale;
        result.biases[group] = bias;
        for (size_t index = 0; index < values.size(); ++index) {
            float q = round_value((values[index] - bias) / scale, rounding);
            q = std::clamp(q, 0.0f, n_bins);
            put_code(result.codes, bits, group * static_cast<size_t>(group_size) + index, static_cast<uint32_t>(q));
        }
    }
    return result;
}

}  // namespace cherenkov::model_data
