#include "store/packer/row_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/half.h"
#include "store/manifest/record_layout.h"
#include "store/packer/row_quantizer_avx2.h"

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

// One group with MLX's affine algorithm, GPU variant (docs/formats.md §2.5): the same float32
// operations as model_data::quantize_mlx_row, writing codes and BF16 scale / bias in place
// without allocating. RowQuantizer tests hold the two equal bit for bit. A group's codes are
// whole bytes (group sizes are multiples of 8).
void quantize_group_portable(const float* values, int bits, int group_size, std::byte* codes,
                             std::byte* scale_out, std::byte* bias_out) {
    const float n_bins = static_cast<float>((1u << bits) - 1);
    const float eps = 1e-7f;
    const auto group = static_cast<size_t>(group_size);
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
    store_u16(scale_out, float_to_bf16(scale));
    store_u16(bias_out, float_to_bf16(bias));
    uint64_t stream = 0;  // bits not yet flushed to `codes`
    int stream_bits = 0;
    size_t out = 0;
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

// Dequantizes one row: out[k] = scale · q + bias per group, multiply and add rounded separately
// like model_data::dequantize_mlx_row (this file is built without FMA). 8 codes take exactly
// Bits bytes; they are read byte by byte into one word (the compiler merges the loads).
template <int Bits>
void dequantize_row_bits(const uint8_t* codes, const std::byte* scales, const std::byte* biases,
                         uint64_t cols, int group_size, float* out) {
    constexpr uint64_t kMask = (uint64_t{1} << Bits) - 1;
    for (uint64_t c0 = 0; c0 < cols; c0 += static_cast<uint64_t>(group_size)) {
        const uint64_t group = c0 / static_cast<uint64_t>(group_size);
        const float scale = bf16_to_float(load_u16(scales + group * 2));
        const float bias = bf16_to_float(load_u16(biases + group * 2));
        for (uint64_t c8 = c0; c8 < c0 + static_cast<uint64_t>(group_size); c8 += 8) {
            const uint8_t* bytes = codes + c8 / 8 * Bits;
            uint64_t window = 0;
            for (int byte = 0; byte < Bits; ++byte) window |= uint64_t{bytes[byte]} << (8 * byte);
            for (int k = 0; k < 8; ++k) {
                const auto q =
                    static_cast<float>(static_cast<int32_t>((window >> (k * Bits)) & kMask));
                out[c8 + static_cast<uint64_t>(k)] = scale * q + bias;
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

void quantize_row_portable(std::span<const float> row, int bits, int group_size, std::byte* codes,
                           std::byte* scales, std::byte* biases) {
    const auto group = static_cast<size_t>(group_size);
    const size_t group_code_bytes = group * static_cast<size_t>(bits) / 8;
    for (size_t index = 0; index < row.size() / group; ++index) {
        quantize_group_portable(row.data() + index * group, bits, group_size,
                                codes + index * group_code_bytes, scales + index * 2,
                                biases + index * 2);
    }
}

void quantize_row(std::span<const float> row, int bits, int group_size, std::byte* codes,
                  std::byte* scales, std::byte* biases) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") &&
        quantize_row_avx2(row, bits, group_size, codes, scales, biases, quantize_group_portable)) {
        return;
    }
#endif
    quantize_row_portable(row, bits, group_size, codes, scales, biases);
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
    CHERENKOV_ASSERT(out.size() == n_rows * cols && codes.size() >= n_rows * code_row &&
                         scales.size() >= n_rows * groups * 2 && biases.size() >= scales.size(),
                     "dequantize sizes");
    CHERENKOV_ASSERT(group_size % 8 == 0, "groups of whole code bytes");
    for (uint64_t row = 0; row < n_rows; ++row) {
        const auto* row_codes = reinterpret_cast<const uint8_t*>(codes.data()) + row * code_row;
        const std::byte* row_scales = scales.data() + row * groups * 2;
        const std::byte* row_biases = biases.data() + row * groups * 2;
        float* row_out = out.data() + row * cols;
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx2") &&
            dequantize_row_avx2(row_codes, row_scales, row_biases, cols, bits, group_size,
                                row_out)) {
            continue;
        }
#endif
        switch (bits) {
            case 2:
                dequantize_row_bits<2>(row_codes, row_scales, row_biases, cols, group_size,
                                       row_out);
                break;
            case 3:
                dequantize_row_bits<3>(row_codes, row_scales, row_biases, cols, group_size,
                                       row_out);
                break;
            case 4:
                dequantize_row_bits<4>(row_codes, row_scales, row_biases, cols, group_size,
                                       row_out);
                break;
            case 5:
                dequantize_row_bits<5>(row_codes, row_scales, row_biases, cols, group_size,
                                       row_out);
                break;
            case 6:
                dequantize_row_bits<6>(row_codes, row_scales, row_biases, cols, group_size,
                                       row_out);
                break;
            case 8:
                dequantize_row_bits<8>(row_codes, row_scales, row_biases, cols, group_size,
                                       row_out);
                break;
            default: throw_unsupported(std::to_string(bits) + "-bit affine codes");
        }
    }
}

}  // namespace cherenkov::store
