// AVX2 version of the packer's row quantizer (row_quantizer.cpp chooses it at run time). It
// produces the same bytes as the portable quantize_row: the per-group parameters are computed by
// the same scalar code, and the per-value steps (subtract, divide, round half away from zero,
// clamp) are exact in any lane order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace cherenkov::store {

// Returns false (writing nothing) when the row is not handled here: bits other than
// 2, 3, 4, 5, 6, 8 or a group size that is not a multiple of 32 (at most 128). Groups holding a
// NaN are passed to `scalar_group` so that even their bytes match the portable quantizer.
using ScalarGroupQuantizer = void (*)(const float* values, int bits, int group_size,
                                      std::byte* codes, std::byte* scale, std::byte* bias);
bool quantize_row_avx2(std::span<const float> row, int bits, int group_size, std::byte* codes,
                       std::byte* scales, std::byte* biases, ScalarGroupQuantizer scalar_group);

// out[c] = scale · q + bias for one row of 2-, 4- or 8-bit codes (multiply and add rounded
// separately, as the portable dequantizer does). Returns false for other widths.
bool dequantize_row_avx2(const uint8_t* codes, const std::byte* scales, const std::byte* biases,
                         uint64_t cols, int bits, int group_size, float* out);

}  // namespace cherenkov::store
