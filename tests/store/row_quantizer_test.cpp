#include "store/packer/row_quantizer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "model_data/encodings/mlx_affine.h"

namespace cherenkov::store {
namespace {

uint16_t u16_at(const std::vector<std::byte>& bytes, size_t index) {
    uint16_t value = 0;
    std::memcpy(&value, &bytes[index * 2], 2);
    return value;
}

uint32_t u32_at(const std::vector<std::byte>& bytes, size_t index) {
    uint32_t value = 0;
    std::memcpy(&value, &bytes[index * 4], 4);
    return value;
}

// docs/formats.md §2.6 example A: w[k] = (k - 20) / 32, 4-bit group 64.
TEST(RowQuantizer, MatchesFormatsWorkedExampleA) {
    std::vector<float> row(64);
    for (size_t k = 0; k < 64; ++k) row[k] = (static_cast<float>(k) - 20.0f) / 32.0f;
    std::vector<std::byte> codes(32), scales(2), biases(2);
    WorkPool pool(2);
    quantize_rows(row, 1, 64, 4, 64, codes, scales, biases, pool);
    EXPECT_EQ(u32_at(codes, 0), 0xdddeeeefu);
    EXPECT_EQ(u32_at(codes, 1), 0xbbccccddu);
    EXPECT_EQ(u32_at(codes, 2), 0x9aaaaabbu);
    EXPECT_EQ(u32_at(codes, 3), 0x78888999u);
    EXPECT_EQ(u16_at(scales, 0), 0xbe0a);
    EXPECT_EQ(u16_at(biases, 0), 0x3fac);
}

TEST(RowQuantizer, MatchesFormatsWorkedExamplesBAndC) {
    std::vector<float> row(64);
    for (size_t k = 0; k < 64; ++k) row[k] = (static_cast<float>(k) - 20.0f) / 32.0f;
    WorkPool pool(1);
    std::vector<std::byte> codes3(24), scales(2), biases(2);
    quantize_rows(row, 1, 64, 3, 64, codes3, scales, biases, pool);
    EXPECT_EQ(u32_at(codes3, 0), 0xb6ffffffu);
    EXPECT_EQ(u32_at(codes3, 1), 0xdb6ddb6du);
    EXPECT_EQ(u16_at(scales, 0), 0xbe8a);
    std::vector<std::byte> codes2(16);
    quantize_rows(row, 1, 64, 2, 64, codes2, scales, biases, pool);
    EXPECT_EQ(u32_at(codes2, 0), 0xaaafffffu);
    EXPECT_EQ(u32_at(codes2, 1), 0x6aaaaaaau);
    EXPECT_EQ(u32_at(codes2, 2), 0x55555555u);
    EXPECT_EQ(u32_at(codes2, 3), 0x00000155u);
    EXPECT_EQ(u16_at(scales, 0), 0xbf2c);
}

// Example D: GPU rounding (half away from zero) at exact ties.
TEST(RowQuantizer, RoundsTiesAwayFromZeroLikeMlxGpu) {
    std::vector<float> row(64);
    for (size_t k = 0; k < 64; ++k) row[k] = (static_cast<float>(k) - 40.0f) / 32.0f;
    std::vector<std::byte> codes(32), scales(2), biases(2);
    WorkPool pool(1);
    quantize_rows(row, 1, 64, 4, 64, codes, scales, biases, pool);
    EXPECT_EQ(u32_at(codes, 0), 0x22111100u);
}

TEST(RowQuantizer, OutputDoesNotDependOnThreadCount) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    const uint64_t rows = 100, cols = 256;
    std::vector<float> values(rows * cols);
    for (float& value : values) value = normal(rng);
    std::vector<std::byte> codes_a(rows * cols / 2), scales_a(rows * 4 * 2), biases_a(rows * 4 * 2);
    std::vector<std::byte> codes_b = codes_a, scales_b = scales_a, biases_b = biases_a;
    WorkPool one(1), many(5);
    quantize_rows(values, rows, cols, 4, 64, codes_a, scales_a, biases_a, one);
    quantize_rows(values, rows, cols, 4, 64, codes_b, scales_b, biases_b, many);
    EXPECT_EQ(codes_a, codes_b);
    EXPECT_EQ(scales_a, scales_b);
    EXPECT_EQ(biases_a, biases_b);
}

// Q4 -> Q3 / Q2 requantization (the low-bit derivation) stays within about one step of the grid.
TEST(RowQuantizer, LowBitRequantizationErrorWithinOneStep) {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    const uint64_t rows = 16, cols = 128, groups = cols / 64;
    std::vector<float> source(rows * cols);
    for (float& value : source) value = normal(rng);
    WorkPool pool(2);
    std::vector<std::byte> codes4(rows * cols / 2), scales4(rows * groups * 2),
        biases4(rows * groups * 2);
    quantize_rows(source, rows, cols, 4, 64, codes4, scales4, biases4, pool);
    std::vector<float> q4(rows * cols);
    dequantize_rows(codes4, scales4, biases4, rows, cols, 4, 64, q4);
    for (int bits : {3, 2}) {
        std::vector<std::byte> codes(rows * cols * static_cast<uint64_t>(bits) / 8),
            scales(scales4.size()), biases(biases4.size());
        quantize_rows(q4, rows, cols, bits, 64, codes, scales, biases, pool);
        std::vector<float> decoded(rows * cols);
        dequantize_rows(codes, scales, biases, rows, cols, bits, 64, decoded);
        for (uint64_t row = 0; row < rows; ++row) {
            for (uint64_t group = 0; group < groups; ++group) {
                float lo = 1e9f, hi = -1e9f;
                for (uint64_t k = 0; k < 64; ++k) {
                    lo = std::min(lo, q4[row * cols + group * 64 + k]);
                    hi = std::max(hi, q4[row * cols + group * 64 + k]);
                }
                // One step of the grid; stretched ranges (wmax floored at 0) included.
                const float step = (std::max(hi, 0.0f) - lo) / static_cast<float>((1 << bits) - 1);
                for (uint64_t k = 0; k < 64; ++k) {
                    const uint64_t at = row * cols + group * 64 + k;
                    EXPECT_LE(std::fabs(decoded[at] - q4[at]), step * 1.05f) << "bits " << bits;
                }
            }
        }
    }
}

}  // namespace
}  // namespace cherenkov::store

namespace cherenkov::store {
namespace {

// The packer's in-place quantizer equals model_data's reference quantize_mlx_row (GPU rounding)
// bit for bit, at every width the store writes.
TEST(RowQuantizer, EqualsReferenceQuantizerBitForBit) {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.03f);
    const uint64_t cols = 192;
    std::vector<float> row(cols);
    WorkPool pool(1);
    for (int trial = 0; trial < 50; ++trial) {
        for (float& value : row)
            value = bf16_to_float(float_to_bf16(normal(rng) + (trial % 3 == 0 ? 0.05f : 0.0f)));
        if (trial % 7 == 0) std::fill(row.begin(), row.begin() + 64, -0.25f);
        for (int bits : {2, 3, 4, 8}) {
            const model_data::QuantizedRow reference =
                model_data::quantize_mlx_row(row, bits, 64, model_data::MlxRounding::Gpu);
            std::vector<std::byte> codes(cols * static_cast<uint64_t>(bits) / 8), scales(6),
                biases(6);
            quantize_rows(row, 1, cols, bits, 64, codes, scales, biases, pool);
            ASSERT_EQ(std::memcmp(codes.data(), reference.codes.data(), codes.size()), 0)
                << "bits " << bits;
            for (size_t group = 0; group < 3; ++group) {
                EXPECT_EQ(u16_at(scales, group), float_to_bf16(reference.scales[group]));
                EXPECT_EQ(u16_at(biases, group), float_to_bf16(reference.biases[group]));
            }
        }
    }
}

// The vector quantizer (used when the CPU has AVX2) writes the same bytes as the portable one,
// including exact rounding ties, one-signed and constant groups, and a group holding a NaN.
TEST(RowQuantizer, FastPathEqualsPortableQuantizer) {
    std::mt19937 rng(19);
    std::normal_distribution<float> normal(0.0f, 0.04f);
    for (const int group_size : {32, 64, 128}) {
        const uint64_t cols = 3 * static_cast<uint64_t>(group_size);
        std::vector<float> row(cols);
        for (int trial = 0; trial < 40; ++trial) {
            for (float& value : row) value = normal(rng);
            if (trial % 4 == 1) {  // ties: (k - 40) / 32 hits .5 steps at 4 bits
                for (size_t k = 0; k < cols; ++k)
                    row[k] = (static_cast<float>(k % 64) - 40.0f) / 32.0f;
            }
            if (trial % 4 == 2) {
                for (float& value : row) value = std::fabs(value) + 0.5f;  // all positive
            }
            if (trial % 4 == 3) {
                std::fill(row.begin(), row.begin() + group_size, 0.0f);  // constant group
                std::fill(row.begin() + group_size, row.begin() + int64_t{2} * group_size, -0.25f);
            }
            if (trial == 5) row[static_cast<size_t>(group_size) + 3] = NAN;
            for (const int bits : {2, 3, 4, 5, 6, 8}) {
                const uint64_t code_bytes = cols * static_cast<uint64_t>(bits) / 8;
                std::vector<std::byte> codes(code_bytes), scales(6), biases(6);
                std::vector<std::byte> ref_codes(code_bytes), ref_scales(6), ref_biases(6);
                quantize_row(row, bits, group_size, codes.data(), scales.data(), biases.data());
                quantize_row_portable(row, bits, group_size, ref_codes.data(), ref_scales.data(),
                                      ref_biases.data());
                ASSERT_EQ(codes, ref_codes)
                    << "bits " << bits << " group " << group_size << " trial " << trial;
                ASSERT_EQ(scales, ref_scales) << "bits " << bits << " trial " << trial;
                ASSERT_EQ(biases, ref_biases) << "bits " << bits << " trial " << trial;
            }
        }
    }
}

// dequantize_rows equals model_data's dequantizer bit for bit (the low-bit tables depend on it).
TEST(RowQuantizer, DequantizeRowsEqualsModelDataDequantizer) {
    std::mt19937 rng(23);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    const uint64_t rows = 5, cols = 256;
    WorkPool pool(1);
    for (const int bits : {2, 3, 4, 5, 6, 8}) {
        std::vector<float> values(rows * cols);
        for (float& value : values) value = normal(rng);
        const uint64_t groups = cols / 64;
        std::vector<std::byte> codes(rows * cols * static_cast<uint64_t>(bits) / 8),
            scales(rows * groups * 2), biases(rows * groups * 2);
        quantize_rows(values, rows, cols, bits, 64, codes, scales, biases, pool);
        std::vector<float> fast(rows * cols);
        dequantize_rows(codes, scales, biases, rows, cols, bits, 64, fast);
        for (uint64_t row = 0; row < rows; ++row) {
            std::vector<float> row_scales(groups), row_biases(groups), reference(cols);
            for (uint64_t group = 0; group < groups; ++group) {
                row_scales[group] = bf16_to_float(u16_at(scales, row * groups + group));
                row_biases[group] = bf16_to_float(u16_at(biases, row * groups + group));
            }
            const auto row_codes =
                std::span(reinterpret_cast<const uint8_t*>(codes.data()) + row * cols * bits / 8,
                          cols * bits / 8);
            model_data::dequantize_mlx_row(row_codes, row_scales, row_biases, bits, 64, reference);
            for (uint64_t col = 0; col < cols; ++col) {
                ASSERT_EQ(std::bit_cast<uint32_t>(reference[col]),
                          std::bit_cast<uint32_t>(fast[row * cols + col]))
                    << "bits " << bits << " row " << row << " col " << col;
            }
        }
    }
}

}  // namespace
}  // namespace cherenkov::store
