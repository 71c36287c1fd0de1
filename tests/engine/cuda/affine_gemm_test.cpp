// GPU prefill matmuls (engine/cuda/affine_gemm.h) against the CPU matmul: every bit width × group
// size × prefill row count on odd and Flash shapes, a vocabulary-sized matrix, strided and
// unaligned inputs, float32 weights as GEMV and GEMM, and bitwise reproducibility across row
// counts (tile shapes). The linear layer on top of them (linear_apply, affine_matmul) is checked
// in ops_vs_cpu_linear_test.cpp. Skips without a device; in a build without CUDA it checks that
// calls say so.
#include "engine/cuda/affine_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_test.h"

namespace cherenkov::engine::cuda {
namespace {

using affine_test::abs_products;
using affine_test::kTolerance;
using affine_test::magnitudes;
using affine_test::make_matrix;
using affine_test::random_vector;
using affine_test::TestMatrix;

constexpr int kBits[] = {2, 3, 4, 8};
constexpr int64_t kPrefillRows[] = {5, 17, 64, 300};

class CudaAffineGemm : public DeviceTest {
protected:
    ThreadPool pool_{0};
};

// Where x and y sit in device memory: x starts `x_offset` floats into its buffer (1: not 16-byte
// aligned), rows `x_stride` / `y_stride` apart.
struct Layout {
    size_t x_stride = 0;
    size_t y_stride = 0;
    size_t x_offset = 0;
};

Layout contiguous(int64_t rows, int64_t cols) {
    return Layout{static_cast<size_t>(cols), static_cast<size_t>(rows), 0};
}

// Compares y [n_rows, y_stride] from the device with the CPU's: valid entries within
// kTolerance·scale, the stride padding still NaN (never written). Returns the worst relative
// error, or −1 after the first failure.
double compare(const std::vector<float>& got, const std::vector<float>& expected,
               const std::vector<double>& scale, int64_t rows, int64_t n_rows, size_t y_stride,
               const std::string& what) {
    double worst = 0.0;
    for (int64_t t = 0; t < n_rows; ++t) {
        for (size_t r = 0; r < y_stride; ++r) {
            const size_t index = static_cast<size_t>(t) * y_stride + r;
            if (r >= static_cast<size_t>(rows)) {
                EXPECT_TRUE(std::isnan(got[index]))
                    << what << " wrote padding t=" << t << " r=" << r;
                if (!std::isnan(got[index])) return -1.0;
                continue;
            }
            const double magnitude = scale[static_cast<size_t>(t * rows) + r];
            const double diff = std::fabs(static_cast<double>(got[index]) - expected[index]);
            const double bound = kTolerance * magnitude + 1e-6;
            EXPECT_LE(diff, bound) << what << " t=" << t << " row=" << r << " gpu=" << got[index]
                                   << " cpu=" << expected[index];
            if (!(diff <= bound)) return -1.0;
            worst = std::max(worst, diff / (magnitude + 1e-30));
        }
    }
    return worst;
}

// Runs affine_gemm for `m` on n_rows random rows laid out as `layout`, against the CPU matmul.
double check_affine(const TestMatrix& m, const DeviceAffineMatrix& device, int64_t n_rows,
                    const Layout& layout, uint64_t seed, ThreadPool* pool,
                    const std::string& what) {
    const size_t n_x = static_cast<size_t>(n_rows) * layout.x_stride;
    const std::vector<float> x = random_vector(n_x, seed);
    std::vector<float> expected(static_cast<size_t>(n_rows) * layout.y_stride);
    matmul(m.host(), x.data(), layout.x_stride, n_rows, expected.data(), layout.y_stride, pool);
    const std::vector<double> scale = magnitudes(m, x, layout.x_stride, n_rows, pool);

    DeviceBuffer d_x((layout.x_offset + n_x) * sizeof(float));
    d_x.upload(x.data(), n_x * sizeof(float), layout.x_offset * sizeof(float));
    DeviceBuffer d_y(expected.size() * sizeof(float));
    d_y.fill(0xFF);  // NaN: an unwritten output fails, a stray write into the padding too
    const float* d_x0 = d_x.as<float>() + layout.x_offset;
    affine_gemm(device, d_x0, layout.x_stride, n_rows, d_y.as<float>(), layout.y_stride, nullptr);
    std::vector<float> got(expected.size());
    d_y.download(got.data(), got.size() * sizeof(float));
    return compare(got, expected, scale, m.rows, n_rows, layout.y_stride, what);
}

std::string describe(const TestMatrix& m, int64_t n_rows) {
    return "bits=" + std::to_string(m.bits) + " group=" + std::to_string(m.group_size) +
           " shape=[" + std::to_string(m.rows) + "," + std::to_string(m.cols) +
           "] n_rows=" + std::to_string(n_rows);
}

TEST_F(CudaAffineGemm, MatchesCpuForEveryBitWidthGroupSizeAndRowCount) {
    double worst = 0.0;
    // 131 and 300 rows leave the last 128-row tile ragged; strides pad x and y rows.
    const int64_t shapes[][2] = {{131, 640}, {300, 384}};
    for (const int bits : kBits) {
        for (const int group_size : {32, 64, 128}) {
            for (const auto& shape : shapes) {
                const TestMatrix m =
                    make_matrix(shape[0], shape[1], bits, group_size, bits * 131 + group_size);
                const Layout layout{static_cast<size_t>(shape[1]) + 4,
                                    static_cast<size_t>(shape[0]) + 3, 0};
                for (const int64_t n_rows : kPrefillRows) {
                    const double e = check_affine(m, m.device(), n_rows, layout,
                                                  static_cast<uint64_t>(bits + n_rows), &pool_,
                                                  describe(m, n_rows));
                    if (e < 0) return;
                    worst = std::max(worst, e);
                }
            }
        }
    }
    std::printf("odd shapes: max relative to Σ|w·x| %.3g\n", worst);
}

TEST_F(CudaAffineGemm, MatchesCpuOnFlashShapes) {
    const int64_t shapes[][2] = {{10240, 2560}, {2560, 640}, {640, 2560}};
    for (const auto& shape : shapes) {
        for (const int bits : kBits) {
            const TestMatrix m =
                make_matrix(shape[0], shape[1], bits, 64,
                            static_cast<uint64_t>(bits) * 7 + static_cast<uint64_t>(shape[0]));
            // Every row count at Q4, one prefill size at the other widths.
            for (const int64_t n_rows : kPrefillRows) {
                if (bits != 4 && n_rows != 64) continue;
                const double e =
                    check_affine(m, m.device(), n_rows, contiguous(shape[0], shape[1]),
                                 static_cast<uint64_t>(n_rows), &pool_, describe(m, n_rows));
                if (e < 0) return;
                std::printf("%s: max relative to Σ|w·x| %.3g\n", describe(m, n_rows).c_str(), e);
            }
        }
    }
}

TEST_F(CudaAffineGemm, MatchesCpuOnAVocabularySizedMatrix) {
    const TestMatrix m = make_matrix(151936, 2560, 4, 64, 151936);
    for (const int64_t n_rows : {int64_t{5}, int64_t{40}}) {
        const double e = check_affine(m, m.device(), n_rows, contiguous(m.rows, m.cols), 3, &pool_,
                                      describe(m, n_rows));
        if (e < 0) return;
        std::printf("%s: max relative to Σ|w·x| %.3g\n", describe(m, n_rows).c_str(), e);
    }
}

// x one float past a 16-byte boundary with an odd stride (4-byte copies), y rows padded; 3-bit
// codes only 4-byte aligned.
TEST_F(CudaAffineGemm, HandlesUnalignedAndStridedRows) {
    for (const int bits : kBits) {
        const TestMatrix m = make_matrix(200, 1024, bits, 64, 77 + bits);
        DeviceAffineMatrix device = m.device();
        DeviceBuffer shifted_codes(m.codes.size() + 16);
        if (bits == 3) {
            shifted_codes.upload(m.codes.data(), m.codes.size(), 4);
            device.codes = shifted_codes.as<const uint8_t>() + 4;
        }
        const Layout layout{1024 + 1, 200 + 5, 1};
        for (const int64_t n_rows : {int64_t{5}, int64_t{64}}) {
            const double e = check_affine(m, device, n_rows, layout, 9, &pool_,
                                          "unaligned " + describe(m, n_rows));
            if (e < 0) return;
        }
    }
}

// Each output sums its columns in one fixed order whatever the tile shape, so the first rows of
// a 5-, 256- and 1024-row call (32-, 64- and 128-token tiles on an H200) are the same bits, and
// a repeated call gives the same bits.
TEST_F(CudaAffineGemm, ResultsAreBitwiseReproducibleAcrossRowCounts) {
    for (const int bits : {3, 4}) {
        const TestMatrix m = make_matrix(10240, 2560, bits, 64, 42 + bits);
        const size_t n_out = 10240;
        const auto x = random_vector(size_t{1024} * 2560, 3);
        DeviceBuffer d_x(x.size() * 4), d_y(size_t{1024} * n_out * 4);
        d_x.upload(x.data(), x.size() * 4);
        std::vector<float> reference(size_t{1024} * n_out);
        affine_gemm(m.device(), d_x.as<float>(), 2560, 1024, d_y.as<float>(), n_out, nullptr);
        d_y.download(reference.data(), reference.size() * 4);
        for (const int64_t n_rows : {int64_t{1024}, int64_t{256}, int64_t{5}}) {
            d_y.fill(0xFF);
            affine_gemm(m.device(), d_x.as<float>(), 2560, n_rows, d_y.as<float>(), n_out, nullptr);
            std::vector<float> got(static_cast<size_t>(n_rows) * n_out);
            d_y.download(got.data(), got.size() * 4);
            EXPECT_EQ(std::memcmp(got.data(), reference.data(), got.size() * 4), 0)
                << "bits=" << bits << " n_rows=" << n_rows;
        }
    }
}

// A random float32 matrix [rows, cols] (entries ±0.05) on the host and the device.
struct TestF32Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<float> data;
    DeviceBuffer d_data;

    F32Matrix host() const { return F32Matrix{rows, cols, data.data()}; }
    DeviceF32Matrix device() const { return DeviceF32Matrix{rows, cols, d_data.as<const float>()}; }
};

TestF32Matrix make_f32_matrix(int64_t rows, int64_t cols, uint64_t seed) {
    TestF32Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = random_vector(static_cast<size_t>(rows * cols), seed);
    for (float& v : m.data) v *= 0.05F;
    m.d_data = DeviceBuffer(m.data.size() * sizeof(float));
    m.d_data.upload(m.data.data(), m.data.size() * sizeof(float));
    return m;
}

std::vector<double> f32_magnitudes(const TestF32Matrix& m, const std::vector<float>& x,
                                   size_t x_stride, int64_t n_rows, ThreadPool* pool) {
    auto fill_rows = [&](int64_t first, int64_t n, float* out) {
        std::copy_n(m.data.begin() + first * m.cols, n * m.cols, out);
    };
    return abs_products(m.rows, m.cols, x, x_stride, n_rows, fill_rows, pool);
}

// 1-4 rows: the GEMV (8 warps on a [1, 2560] gate, split rows on [512, 2560], scalar loads when
// cols % 4 ≠ 0 or x is unaligned); 5+ rows: the tiled kernel, with a ragged last K step at
// cols 99 (W read by floats, x by a 16-byte copy of 3 valid floats, or by floats at x_offset 1)
// and cols 100.
TEST_F(CudaAffineGemm, F32MatmulMatchesCpu) {
    const int64_t shapes[][2] = {{512, 2560}, {1, 2560}, {257, 99}, {40, 100}, {300, 64}};
    for (const auto& shape : shapes) {
        const TestF32Matrix m = make_f32_matrix(shape[0], shape[1], 31 + shape[0]);
        for (const int64_t n_rows : {1, 2, 3, 4, 5, 64}) {
            for (const size_t x_offset : {size_t{0}, size_t{1}}) {
                const Layout layout{static_cast<size_t>((shape[1] + 3) / 4 * 4) + 4 + x_offset,
                                    static_cast<size_t>(shape[0]) + 1, x_offset};
                const size_t n_x = static_cast<size_t>(n_rows) * layout.x_stride;
                const auto x = random_vector(n_x, 7 + static_cast<uint64_t>(n_rows));
                std::vector<float> expected(static_cast<size_t>(n_rows) * layout.y_stride);
                matmul(m.host(), x.data(), layout.x_stride, n_rows, expected.data(),
                       layout.y_stride, &pool_);
                const auto scale = f32_magnitudes(m, x, layout.x_stride, n_rows, &pool_);
                DeviceBuffer d_x((x_offset + n_x) * 4), d_y(expected.size() * 4);
                d_x.upload(x.data(), n_x * 4, x_offset * 4);
                d_y.fill(0xFF);
                f32_matmul(m.device(), d_x.as<float>() + x_offset, layout.x_stride, n_rows,
                           d_y.as<float>(), layout.y_stride, nullptr);
                std::vector<float> got(expected.size());
                d_y.download(got.data(), got.size() * 4);
                const std::string what =
                    "f32 shape=[" + std::to_string(shape[0]) + "," + std::to_string(shape[1]) +
                    "] n_rows=" + std::to_string(n_rows) + " x_offset=" + std::to_string(x_offset);
                if (compare(got, expected, scale, m.rows, n_rows, layout.y_stride, what) < 0) {
                    return;
                }
            }
        }
    }
}

TEST_F(CudaAffineGemm, RejectsBadArguments) {
    const TestMatrix m = make_matrix(8, 64, 4, 64, 1);
    DeviceBuffer d_x(size_t{8} * 64 * 4), d_y(size_t{8} * 8 * 4);
    DeviceAffineMatrix five_bit = m.device();
    five_bit.bits = 5;
    EXPECT_THROW(affine_gemm(five_bit, d_x.as<float>(), 64, 8, d_y.as<float>(), 8, nullptr), Error);
    DeviceAffineMatrix group_16 = m.device();
    group_16.group_size = 16;
    EXPECT_THROW(affine_gemm(group_16, d_x.as<float>(), 64, 8, d_y.as<float>(), 8, nullptr), Error);
    EXPECT_THROW(affine_gemm(m.device(), d_x.as<float>(), 32, 8, d_y.as<float>(), 8, nullptr),
                 Error);  // x_stride < cols
    EXPECT_THROW(affine_gemm(m.device(), d_x.as<float>(), 64, -1, d_y.as<float>(), 8, nullptr),
                 Error);
    EXPECT_THROW(affine_gemm(m.device(), nullptr, 64, 8, d_y.as<float>(), 8, nullptr), Error);
    EXPECT_THROW(f32_matmul(DeviceF32Matrix{0, 64, d_x.as<const float>()}, d_x.as<float>(), 64, 8,
                            d_y.as<float>(), 8, nullptr),
                 Error);
    EXPECT_THROW(f32_matmul(DeviceF32Matrix{8, 64, d_x.as<const float>()}, d_x.as<float>(), 64, 8,
                            d_y.as<float>(), 4, nullptr),
                 Error);  // y_stride < rows
}

// Without CUDA every entry point reports why instead of crashing.
TEST(CudaAffineGemmUnavailable, CallsSayBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    try {
        affine_gemm(DeviceAffineMatrix{}, nullptr, 0, 5, nullptr, 0, nullptr);
        FAIL() << "affine_gemm did not throw";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
    EXPECT_THROW(f32_matmul(DeviceF32Matrix{}, nullptr, 0, 5, nullptr, 0, nullptr), Error);
}

}  // namespace
}  // namespace cherenkov::engine::cuda
