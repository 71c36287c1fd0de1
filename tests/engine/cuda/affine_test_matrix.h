// Test support for the GPU affine matmul tests (affine_gemv_test, affine_gemm_test): random
// MLX-affine matrices held on the host and the device, random inputs, and the scale of the
// rounding a float32 GPU sum may differ from the CPU matmul by.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "engine/cpu/matmul.h"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/device_buffer.h"

namespace cherenkov::engine::cuda::affine_test {

// Relative tolerance against the size of the terms: |gpu − cpu| ≤ kTolerance·Σ_c (|w|+2|b|)·|x|.
// Both sides sum in float32 in different orders, so they differ by rounding of the partial sums;
// an indexing bug is off by O(1) of that.
constexpr double kTolerance = 1e-5;

inline uint64_t splitmix(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

inline float uniform(uint64_t& state) {  // [-1, 1)
    return static_cast<float>(splitmix(state) >> 40) / static_cast<float>(1 << 23) - 1.0F;
}

// A random affine matrix on the host (random code bytes, scales ~0.01-0.03 of either sign,
// biases centred so w is roughly zero-mean, a third of the rows offset to one sign) and on the
// device.
struct TestMatrix {
    int64_t rows = 0;
    int64_t cols = 0;
    int bits = 4;
    int group_size = 64;
    std::vector<uint8_t> codes;
    std::vector<uint16_t> scales;
    std::vector<uint16_t> biases;
    DeviceBuffer d_codes;
    DeviceBuffer d_scales;
    DeviceBuffer d_biases;

    AffineMatrix host() const {
        return AffineMatrix{rows,         cols,          bits,         group_size,
                            codes.data(), scales.data(), biases.data()};
    }
    DeviceAffineMatrix device() const {
        return DeviceAffineMatrix{rows,
                                  cols,
                                  bits,
                                  group_size,
                                  d_codes.as<const uint8_t>(),
                                  d_scales.as<const uint16_t>(),
                                  d_biases.as<const uint16_t>()};
    }
};

inline TestMatrix make_matrix(int64_t rows, int64_t cols, int bits, int group_size, uint64_t seed) {
    TestMatrix m;
    m.rows = rows;
    m.cols = cols;
    m.bits = bits;
    m.group_size = group_size;
    uint64_t state = seed * 0x100000001B3ULL + 1;
    m.codes.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols) * bits / 8);
    for (size_t i = 0; i < m.codes.size(); i += 8) {
        const uint64_t r = splitmix(state);
        std::memcpy(m.codes.data() + i, &r, std::min<size_t>(8, m.codes.size() - i));
    }
    const auto n_groups = static_cast<size_t>(rows * (cols / group_size));
    const float levels = static_cast<float>((1 << bits) - 1);
    m.scales.reserve(n_groups);
    m.biases.reserve(n_groups);
    for (size_t g = 0; g < n_groups; ++g) {
        const float scale =
            (0.02F + 0.01F * uniform(state)) * (uniform(state) < 0.0F ? -1.0F : 1.0F);
        const int64_t row = static_cast<int64_t>(g) / (cols / group_size);
        const float offset = row % 3 == 0 ? 0.3F : 0.0F;
        m.scales.push_back(float_to_bf16(scale / levels * 15.0F));
        m.biases.push_back(float_to_bf16(-scale * 7.5F + offset + 0.01F * uniform(state)));
    }
    m.d_codes = DeviceBuffer(m.codes.size());
    m.d_codes.upload(m.codes.data(), m.codes.size());
    m.d_scales = DeviceBuffer(m.scales.size() * 2);
    m.d_scales.upload(m.scales.data(), m.scales.size() * 2);
    m.d_biases = DeviceBuffer(m.biases.size() * 2);
    m.d_biases.upload(m.biases.data(), m.biases.size() * 2);
    return m;
}

inline std::vector<float> random_vector(size_t n, uint64_t seed) {
    uint64_t state = seed;
    std::vector<float> values(n);
    for (float& v : values) v = uniform(state);
    return values;
}

// Σ_c |a[row][c]|·|x[t·x_stride + c]| for a float32 matrix |a| given row by row through
// `fill_rows(first, n, out)` (out: [n, cols]), as out[t·rows + row]; summed by the CPU matmul on
// the pool in chunks of rows, so vocabulary-sized matrices never exist as floats at once.
template <typename FillRows>
std::vector<double> abs_products(int64_t rows, int64_t cols, const std::vector<float>& x,
                                 size_t x_stride, int64_t n_rows, FillRows fill_rows,
                                 ThreadPool* pool) {
    constexpr int64_t kChunk = 2048;
    std::vector<float> abs_x(x.size());
    for (size_t i = 0; i < x.size(); ++i) abs_x[i] = std::fabs(x[i]);
    std::vector<double> out(static_cast<size_t>(n_rows * rows));
    std::vector<float> chunk;
    std::vector<float> sums;
    for (int64_t first = 0; first < rows; first += kChunk) {
        const int64_t n = std::min(kChunk, rows - first);
        chunk.resize(static_cast<size_t>(n * cols));
        fill_rows(first, n, chunk.data());
        for (float& v : chunk) v = std::fabs(v);
        sums.resize(static_cast<size_t>(n_rows * n));
        matmul(F32Matrix{n, cols, chunk.data()}, abs_x.data(), x_stride, n_rows, sums.data(),
               static_cast<size_t>(n), pool);
        for (int64_t t = 0; t < n_rows; ++t) {
            for (int64_t row = 0; row < n; ++row) {
                out[static_cast<size_t>(t * rows + first + row)] =
                    sums[static_cast<size_t>(t * n + row)];
            }
        }
    }
    return out;
}

// Σ_c (|w| + 2|b|)·|x| for each (t, row), as out[t·m.rows + row]: the scale of the rounding the
// GPU and CPU sums may differ by.
inline std::vector<double> magnitudes(const TestMatrix& m, const std::vector<float>& x,
                                      size_t x_stride, int64_t n_rows, ThreadPool* pool) {
    const int64_t n_groups = m.cols / m.group_size;
    auto fill_rows = [&](int64_t first, int64_t n, float* out) {
        for (int64_t r = 0; r < n; ++r) {
            float* row = out + r * m.cols;
            dequantize_row(m.host(), first + r, row);
            for (int64_t c = 0; c < m.cols; ++c) {
                const float b = bf16_to_float(
                    m.biases[static_cast<size_t>((first + r) * n_groups + c / m.group_size)]);
                row[c] = std::fabs(row[c]) + 2.0F * std::fabs(b);
            }
        }
    };
    return abs_products(m.rows, m.cols, x, x_stride, n_rows, fill_rows, pool);
}

}  // namespace cherenkov::engine::cuda::affine_test
