// MLX affine quantization (docs/formats.md §2): bit unpacking of one row's little-endian code
// stream, dequantization, and the quantizer that reproduces mx.quantize's bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cherenkov::model_data {

// Bytes of packed codes for `n_values` values of `bits` bits (always whole uint32 words for
// rows whose length is a multiple of 32).
inline size_t mlx_packed_bytes(size_t n_values, int bits) { return n_values * static_cast<size_t>(bits) / 8; }

// Code of element `k` in a row's packed stream: stream bits [k*bits, k*bits+bits), LSB first.
inline uint32_t mlx_code(std::span<const uint8_t> row, int bits, size_t k) {
    size_t bit = k * static_cast<size_t>(bits);
    size_t byte = bit / 8;
    uint32_t window = row[byte];
    if (byte + 1 < row.size()) window |= uint32_t{row[byte + 1]} << 8;
    return (window >> (bit % 8)) & ((1u << bits) - 1);
}

// out[k] = scales[k / group] * q[k] + biases[k / group] for one row of `out.size()` values.
void dequantize_mlx_row(std::span<const uint8_t> codes, std::span<const float> scales,
                        std::span<const float> biases, int bits, int group_size, std::span<float> out);

// Which of MLX's two rounding behaviours to reproduce (docs/formats.md §2.5): the GPU kernels
// (Metal, CUDA) floor wmax at 0 and round half away from zero; the CPU kernel uses the true
// max and rounds half to even.
enum class MlxRounding { Gpu, Cpu };

struct QuantizedRow {
    std::vector<uint8_t> codes;   // packed, mlx_packed_bytes(n, bits)
    std::vector<float> scales;    // unrounded float32 per group (cast to the storage dtype later)
    std::vector<float> biases;
};

// Quantizes one row (its length a multiple of group_size) exactly as mx.quantize does.
QuantizedRow quantize_mlx_row(std::span<const float> row, int bits, int group_size, MlxRounding rounding);

}  // namespace cherenkov::model_data
