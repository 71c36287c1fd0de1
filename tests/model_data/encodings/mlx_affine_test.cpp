// The quantizer and unpacker against the worked examples of docs/formats.md §2.6, computed
// there independently of this code.
#include "model_data/encodings/mlx_affine.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/half.h"

namespace cherenkov::model_data {
namespace {

std::vector<float> ramp(int offset, float divisor) {
    std::vector<float> row(64);
    for (int k = 0; k < 64; ++k) row[k] = static_cast<float>(k - offset) / divisor;
    return row;
}

uint32_t word(const std::vector<uint8_t>& codes, size_t index) {
    uint32_t value;
    std::memcpy(&value, codes.data() + 4 * index, 4);
    return value;
}

TEST(MlxAffine, WorkedExampleA_FourBit) {
    QuantizedRow q = quantize_mlx_row(ramp(20, 32), 4, 64, MlxRounding::Gpu);
    ASSERT_EQ(q.codes.size(), 32u);
    EXPECT_EQ(word(q.codes, 0), 0xdddeeeefu);
    EXPECT_EQ(word(q.codes, 1), 0xbbccccddu);
    EXPECT_EQ(word(q.codes, 2), 0x9aaaaabbu);
    EXPECT_EQ(word(q.codes, 3), 0x78888999u);
    EXPECT_EQ(float_to_bf16(q.scales[0]), 0xbe0a);
    EXPECT_EQ(float_to_bf16(q.biases[0]), 0x3fac);
    const uint32_t expected_tail[] = {7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4,
                                      3, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0};
    for (size_t k = 32; k < 64; ++k) EXPECT_EQ(mlx_code(q.codes, 4, k), expected_tail[k - 32]) << k;
    // Dequantized with the stored bf16 parameters, w[20] is -0.00390625 (§2.6 A).
    std::vector<float> out(64);
    std::vector<float> scales = {bf16_to_float(float_to_bf16(q.scales[0]))};
    std::vector<float> biases = {bf16_to_float(float_to_bf16(q.biases[0]))};
    dequantize_mlx_row(q.codes, scales, biases, 4, 64, out);
    EXPECT_FLOAT_EQ(out[20], -0.00390625f);
}

TEST(MlxAffine, WorkedExampleB_ThreeBitStraddlesWords) {
    QuantizedRow q = quantize_mlx_row(ramp(20, 32), 3, 64, MlxRounding::Gpu);
    ASSERT_EQ(q.codes.size(), 24u);
    EXPECT_EQ(word(q.codes, 0), 0xb6ffffffu);
    EXPECT_EQ(word(q.codes, 1), 0xdb6ddb6du);
    EXPECT_EQ(word(q.codes, 2), 0x924925b6u);
    EXPECT_EQ(word(q.codes, 3), 0x9b6db6dcu);
    EXPECT_EQ(float_to_bf16(q.scales[0]), 0xbe8a);
    EXPECT_EQ(mlx_code(q.codes, 3, 10), 6u);  // bits 30..32 span words 0 and 1
}

TEST(MlxAffine, WorkedExampleC_TwoBit) {
    QuantizedRow q = quantize_mlx_row(ramp(20, 32), 2, 64, MlxRounding::Gpu);
    EXPECT_EQ(word(q.codes, 0), 0xaaafffffu);
    EXPECT_EQ(word(q.codes, 1), 0x6aaaaaaau);
    EXPECT_EQ(word(q.codes, 2), 0x55555555u);
    EXPECT_EQ(word(q.codes, 3), 0x00000155u);
    EXPECT_EQ(float_to_bf16(q.scales[0]), 0xbf2c);
    EXPECT_EQ(float_to_bf16(q.biases[0]), 0x3fac);
}

TEST(MlxAffine, WorkedExampleD_TiesDifferBetweenGpuAndCpu) {
    QuantizedRow gpu = quantize_mlx_row(ramp(40, 32), 4, 64, MlxRounding::Gpu);
    QuantizedRow cpu = quantize_mlx_row(ramp(40, 32), 4, 64, MlxRounding::Cpu);
    EXPECT_EQ(word(gpu.codes, 0), 0x22111100u);
    EXPECT_EQ(word(cpu.codes, 0), 0x22111000u);
    EXPECT_EQ(gpu.scales[0], 0.125f);
    EXPECT_EQ(gpu.biases[0], -1.25f);
}

TEST(MlxAffine, WorkedExampleE_AllNegativeAndAllZeroGroups) {
    std::vector<float> row(64);
    for (int k = 0; k < 64; ++k) row[k] = -10.0f + static_cast<float>(k) / 64.0f;
    QuantizedRow cpu = quantize_mlx_row(row, 4, 64, MlxRounding::Cpu);
    QuantizedRow gpu = quantize_mlx_row(row, 4, 64, MlxRounding::Gpu);
    EXPECT_NEAR(cpu.scales[0], 0.0657895f, 1e-6f);
    EXPECT_EQ(cpu.biases[0], -10.0f);
    EXPECT_NEAR(gpu.scales[0], 2.0f / 3.0f, 1e-6f);
    EXPECT_EQ(gpu.biases[0], -10.0f);
    for (size_t k = 0; k < 64; ++k) EXPECT_LE(mlx_code(gpu.codes, 4, k), 1u);

    QuantizedRow zero = quantize_mlx_row(std::vector<float>(64, 0.0f), 4, 64, MlxRounding::Gpu);
    EXPECT_EQ(float_to_bf16(zero.scales[0]), 0xb3d7);
    EXPECT_EQ(zero.biases[0], 0.0f);
    for (size_t k = 0; k < 64; ++k) EXPECT_EQ(mlx_code(zero.codes, 4, k), 0u);
}

// Interior codes are within half a step; the clamped far end of a group can be off by up to a
// whole step, because rounding q0 moves the grid so that zero is exact (§2.5 step 7).
TEST(MlxAffine, EveryWidthRoundTripsWithinItsStep) {
    std::vector<float> row(128);
    for (size_t k = 0; k < row.size(); ++k) row[k] = std::sin(static_cast<float>(k) * 0.37f) * 3.0f;
    for (int bits : {2, 3, 4, 5, 6, 8}) {
        QuantizedRow q = quantize_mlx_row(row, bits, 64, MlxRounding::Gpu);
        ASSERT_EQ(q.codes.size(), 128u * bits / 8);
        std::vector<float> out(128);
        dequantize_mlx_row(q.codes, q.scales, q.biases, bits, 64, out);
        for (size_t k = 0; k < row.size(); ++k) {
            float step = std::fabs(q.scales[k / 64]);
            uint32_t code = mlx_code(q.codes, bits, k);
            bool clamped_end = code == 0 || code == (1u << bits) - 1;
            float bound = (clamped_end ? 1.0f : 0.5f) * step * 1.0001f + 1e-6f;
            EXPECT_LE(std::fabs(out[k] - row[k]), bound) << "bits " << bits << " k " << k;
        }
    }
}

}  // namespace
}  // namespace cherenkov::model_data
