#include "store/packer/row_quantizer.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "model_data/encodings/mlx_affine.h"
#include "store/manifest/record_layout.h"

namespace cherenkov::store {

namespace {

constexpr uint64_t kRowsPerTask = 8;

uint16_t load_u16(const std::byte* at) {
    uint16_t value = 0;
    std::memcpy(&value, at, sizeof value);
    return value;
}

void store_u16(std::byte* at, uint16_t value) {
    std::memcpy(at, &value, sizeof value);
}

// One row with MLX's affine algorithm, GPU variant (formats.md §2.5): the same float32 operations
// as model_data::quantize_mlx_row, writing codes and BF16 scales / biases in place without
// allocating. RowQuantizer tests hold the two equal bit for bit.
void quantize_row(std::span<const float> row, int bits, int group_size, std::byte* codes,
                  std::byte* scales, std::byte* biases) {
    const float n_bins = static_cast<float>((1u << bits) - 1);
    const float eps = 1e-7f;
    const auto group = static_cast<size_t>(group_size);
    const size_t n_groups = row.size() / group;
    uint64_t stream = 0;  // bits not yet flushed to `codes`
    int stream_bits = 0;
    size_t out = 0;
    for (size_t index = 0; index < n_groups; ++index) {
        const float* values = row.data() + index * group;
        float wmin = values[0];
        float wmax = values[0];
        for (size_t k = 1; k < group; ++k) {
            wmin = std::min(wmin, values[k]);
            wmax = std::max(wmax, values[k]);
        }
        wmax = std::max(wmax, 0.0f);
        float scale0 = std::max((wmax - wmin) / n_bins, eps);
        const bool side = std::fabs(wmin) > std::fabs(wmax);
        if (!side) scale0 = -scale0;
        const float edge = side ? wmin : wmax;
        const float q0 = std::round(edge / scale0);
        float scale = scale0;
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        store_u16(scales + index * 2, float_to_bf16(scale));
        store_u16(biases + index * 2, float_to_bf16(bias));
        for (size_t k = 0; k < group; ++k) {
            const float q = std::clamp(std::round((values[k] - bias) / scale), 0.0f, n_bins);
            stream |= uint64_t{static_cast<uint32_t>(q)} << stream_bits;
            stream_bits += bits;
            while (stream_bits >= 8) {
                codes[out++] = static_cast<std::byte>(stream & 0xFF);
                stream >>= 8;
                stream_bits -= 8;
            }
        }
    }
}

}  // namespace

void decode_floats(std::span<const std::byte> in, model_data::Dtype dtype, std::span<float> out,
                   const std::string& tensor_name) {
    using model_data::Dtype;
    switch (dtype) {
        case Dtype::BF16:
            CHERENKOV_ASSERT(in.size() == out.size() * 2, "bf16 sizes");
            for (size_t index = 0; index < out.size(); ++index)
                out[index] = bf16_to_float(load_u16(&in[index * 2]));
            return;
        case Dtype::F16:
            CHERENKOV_ASSERT(in.size() == out.size() * 2, "f16 sizes");
            for (size_t index = 0; index < out.size(); ++index)
                out[index] = f16_to_float(load_u16(&in[index * 2]));
            return;
        case Dtype::F32:
            CHERENKOV_ASSERT(in.size() == out.size() * 4, "f32 sizes");
            std::memcpy(out.data(), in.data(), in.size());
            return;
        default:
            throw_unsupported("tensor '" + tensor_name + "': dtype " +
                              std::string(model_data::dtype_name(dtype)) +
                              " is not a float type the packer reads");
    }
}

void quantize_rows(std::span<const float> values, uint64_t n_rows, uint64_t cols, int bits,
                   int group_size, std::span<std::byte> codes, std::span<std::byte> scales,
                   std::span<std::byte> biases, WorkPool& pool) {
    const uint64_t code_row = affine_code_bytes(1, cols, bits);
    const uint64_t groups = cols / static_cast<uint64_t>(group_size);
    CHERENKOV_ASSERT(values.size() == n_rows * cols, "value count");
    CHERENKOV_ASSERT(codes.size() == n_rows * code_row, "code bytes");
    CHERENKOV_ASSERT(scales.size() == n_rows * groups * 2 && biases.size() == scales.size(),
                     "scale bytes");
    const size_t n_tasks = (n_rows + kRowsPerTask - 1) / kRowsPerTask;
    pool.run(n_tasks, [&](size_t task) {
        const uint64_t begin = task * kRowsPerTask;
        const uint64_t end = std::min(n_rows, begin + kRowsPerTask);
        for (uint64_t row = begin; row < end; ++row) {
            quantize_row(values.subspan(row * cols, cols), bits, group_size, &codes[row * code_row],
                         &scales[row * groups * 2], &biases[row * groups * 2]);
        }
    });
}

void dequantize_rows(std::span<const std::byte> codes, std::span<const std::byte> scales,
                     std::span<const std::byte> biases, uint64_t n_rows, uint64_t cols, int bits,
                     int group_size, std::span<float> out) {
    const uint64_t code_row = affine_code_bytes(1, cols, bits);
    const uint64_t groups = cols / static_cast<uint64_t>(group_size);
    CHERENKOV_ASSERT(out.size() == n_rows * cols && codes.size() >= n_rows * code_row,
                     "dequantize sizes");
    std::vector<float> row_scales(groups);
    std::vector<float> row_biases(groups);
    for (uint64_t row = 0; row < n_rows; ++row) {
        for (uint64_t group = 0; group < groups; ++group) {
            row_scales[group] = bf16_to_float(load_u16(&scales[(row * groups + group) * 2]));
            row_biases[group] = bf16_to_float(load_u16(&biases[(row * groups + group) * 2]));
        }
        auto row_codes =
            std::span(reinterpret_cast<const uint8_t*>(codes.data()) + row * code_row, code_row);
        model_data::dequantize_mlx_row(row_codes, row_scales, row_biases, bits, group_size,
                                       out.subspan(row * cols, cols));
    }
}

}  // namespace cherenkov::store
