// Row-parallel conversions used by the packer: float decoding of stored rows and MLX affine
// quantization (docs/formats.md §2.5, GPU rounding) of whole row blocks into codes and BF16 scales
// / biases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "model_data/safetensors/dtype.h"
#include "store/packer/work_pool.h"

namespace cherenkov::store {

// Converts little-endian BF16 / F16 / F32 values to float. Throws Unsupported for other dtypes.
void decode_floats(std::span<const std::byte> in, model_data::Dtype dtype, std::span<float> out,
                   const std::string& tensor_name);

// Quantizes one row (its length a multiple of group_size, a multiple of 8) into codes and BF16
// scales / biases, with AVX2 when the CPU has it; the bytes are the same either way.
void quantize_row(std::span<const float> row, int bits, int group_size, std::byte* codes,
                  std::byte* scales, std::byte* biases);
// The plain C++ quantizer (what the AVX2 one is tested against).
void quantize_row_portable(std::span<const float> row, int bits, int group_size, std::byte* codes,
                           std::byte* scales, std::byte* biases);

// Quantizes `n_rows` rows of `cols` floats. Outputs are planar: codes [n_rows, cols*bits/8],
// scales and biases [n_rows, cols/group_size] as BF16 (round to nearest even).
void quantize_rows(std::span<const float> values, uint64_t n_rows, uint64_t cols, int bits,
                   int group_size, std::span<std::byte> codes, std::span<std::byte> scales,
                   std::span<std::byte> biases, WorkPool& pool);

// Dequantizes planar rows (BF16 scales / biases) to float.
void dequantize_rows(std::span<const std::byte> codes, std::span<const std::byte> scales,
                     std::span<const std::byte> biases, uint64_t n_rows, uint64_t cols, int bits,
                     int group_size, std::span<float> out);

}  // namespace cherenkov::store
