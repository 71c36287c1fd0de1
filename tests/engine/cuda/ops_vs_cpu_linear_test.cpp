// The op-vs-CPU harness for linear layers (ops_vs_cpu.h): cuda::affine_matmul and
// cuda::linear_apply (device_linear.cu), the entry points every projection of the model takes,
// which route 1-4 rows to the decode GEMV and more to the GEMV in chunks or the prefill GEMM,
// against the CPU matmul (engine/cpu/matmul.h) over a table of shapes: every bit width × group
// size × decode and prefill row count on odd shapes with strided rows, the Flash shapes,
// unaligned rows, odd row counts around every routing threshold, float32 weights and bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_test.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/ops_vs_cpu.h"

namespace cherenkov::engine::cuda {
namespace {

using affine_test::abs_products;
using affine_test::magnitudes;
using affine_test::make_matrix;
using affine_test::random_vector;
using affine_test::TestMatrix;

// Which op entry point runs the product: affine_matmul with the case's strides, or linear_apply
// (contiguous rows, float32 weights and bias allowed).
enum class Entry { AffineMatmul, LinearApply };

// How far the GPU may be from the CPU, per output, in units of Σ_c (|w| + 2|b|)·|x| (+ |bias|):
// the rounding of the sums (ops_vs_cpu.h sum_rounding over the `in` columns; the GPU sums
// scale·Σqx + bias·Σx per group where the CPU sums (scale·q + bias)·x, so the terms' size is
// |w| + 2|b|), or the 1e-5 that affine_gemm_test and affine_gemv_test hold on these kernels
// (`measured`), tighter, kept for the cases that came from those tests.
struct LinearCase {
    std::string name;
    Entry entry = Entry::AffineMatmul;
    int64_t out = 0;
    int64_t in = 0;
    bool quantized = true;
    int bits = 4;
    int group_size = 64;
    bool bias = false;
    std::vector<int64_t> rows;  // input rows per call
    size_t x_pad = 0;           // x rows `in + x_pad` floats apart (affine_matmul only)
    size_t y_pad = 0;           // y rows `out + y_pad` floats apart (affine_matmul only)
    size_t x_offset = 0;        // x starts this many floats into its buffer (1: unaligned)
    bool measured = false;
};

LinearCase affine_case(std::string name, Entry entry, int64_t out, int64_t in, int bits,
                       int group_size) {
    LinearCase c;
    c.name = std::move(name);
    c.entry = entry;
    c.out = out;
    c.in = in;
    c.bits = bits;
    c.group_size = group_size;
    return c;
}

LinearCase f32_case(std::string name, int64_t out, int64_t in) {
    LinearCase c = affine_case(std::move(name), Entry::LinearApply, out, in, 0, 0);
    c.quantized = false;
    return c;
}

std::string describe(const LinearCase& c, int64_t n_rows) {
    std::string text = c.name + " [" + std::to_string(c.out) + "," + std::to_string(c.in) + "] ";
    text += c.quantized ? "q" + std::to_string(c.bits) + " g" + std::to_string(c.group_size)
                        : std::string("f32");
    if (c.bias) text += " bias";
    if (c.x_offset != 0) text += " x_offset " + std::to_string(c.x_offset);
    return text + " rows " + std::to_string(n_rows);
}

// A random float32 matrix [rows, cols] (entries ±0.05) on the host and the device.
struct TestF32Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<float> data;
    DeviceBuffer d_data;
};

TestF32Matrix make_f32_matrix(int64_t rows, int64_t cols, uint64_t seed) {
    TestF32Matrix m{rows, cols, random_vector(static_cast<size_t>(rows * cols), seed), {}};
    for (float& v : m.data) v *= 0.05F;
    m.d_data = ops_test::to_device(m.data);
    return m;
}

class OpsVsCpuLinear : public DeviceTest {
protected:
    // Runs every row count of `c` through its entry point against the CPU.
    void check(const LinearCase& c, uint64_t seed) {
        TestMatrix q;
        TestF32Matrix f;
        if (c.quantized) q = make_matrix(c.out, c.in, c.bits, c.group_size, seed);
        if (!c.quantized) f = make_f32_matrix(c.out, c.in, seed);
        const std::vector<float> bias =
            c.bias ? random_vector(static_cast<size_t>(c.out), seed + 1) : std::vector<float>{};
        const DeviceBuffer d_bias = ops_test::to_device(bias);
        DeviceLinear linear;
        linear.quantized = c.quantized;
        if (c.quantized) linear.affine = q.device();
        if (!c.quantized) linear.dense = f.d_data.as<const float>();
        linear.rows = c.out;
        linear.cols = c.in;
        linear.bias = c.bias ? d_bias.as<const float>() : nullptr;

        const size_t x_stride = static_cast<size_t>(c.in) + c.x_pad;
        const size_t y_stride = static_cast<size_t>(c.out) + c.y_pad;
        for (const int64_t n_rows : c.rows) {
            const std::string what = describe(c, n_rows);
            const auto n_x = static_cast<size_t>(n_rows) * x_stride;
            const std::vector<float> x =
                random_vector(n_x, seed + 7 * static_cast<uint64_t>(n_rows));
            // The CPU's y [n_rows, out] and the size of each output's terms.
            std::vector<float> expected(static_cast<size_t>(n_rows * c.out));
            std::vector<double> scale;
            if (c.quantized) {
                matmul(q.host(), x.data(), x_stride, n_rows, expected.data(),
                       static_cast<size_t>(c.out), &pool_);
                scale = magnitudes(q, x, x_stride, n_rows, &pool_);
            } else {
                matmul(F32Matrix{c.out, c.in, f.data.data()}, x.data(), x_stride, n_rows,
                       expected.data(), static_cast<size_t>(c.out), &pool_);
                const auto fill_rows = [&](int64_t first, int64_t n, float* rows_out) {
                    std::copy_n(f.data.begin() + first * c.in, n * c.in, rows_out);
                };
                scale = abs_products(c.out, c.in, x, x_stride, n_rows, fill_rows, &pool_);
            }
            for (size_t i = 0; i < expected.size() && c.bias; ++i) {
                expected[i] += bias[i % static_cast<size_t>(c.out)];
                scale[i] += std::fabs(bias[i % static_cast<size_t>(c.out)]);
            }

            DeviceBuffer d_x((c.x_offset + std::max<size_t>(1, n_x)) * sizeof(float));
            if (n_x > 0) d_x.upload(x.data(), n_x * sizeof(float), c.x_offset * sizeof(float));
            const DeviceBuffer d_y = ops_test::poisoned(static_cast<size_t>(n_rows) * y_stride);
            const float* d_x0 = d_x.as<float>() + c.x_offset;
            if (c.entry == Entry::AffineMatmul) {
                affine_matmul(linear.affine, d_x0, x_stride, n_rows, d_y.as<float>(), y_stride,
                              stream_.get());
            } else {
                linear_apply(linear, d_x0, n_rows, d_y.as<float>(), stream_.get());
            }
            stream_.synchronize();
            const std::vector<float> strided =
                ops_test::to_host(d_y, static_cast<size_t>(n_rows) * y_stride);

            // The outputs, and the stride padding still NaN (never written).
            std::vector<float> got(expected.size());
            size_t padding_written = 0;
            for (int64_t t = 0; t < n_rows; ++t) {
                for (size_t r = 0; r < y_stride; ++r) {
                    const float v = strided[static_cast<size_t>(t) * y_stride + r];
                    if (r < static_cast<size_t>(c.out)) {
                        got[static_cast<size_t>(t * c.out) + r] = v;
                    } else if (!std::isnan(v)) {
                        ++padding_written;
                    }
                }
            }
            EXPECT_EQ(padding_written, 0U) << what << " wrote into the stride padding";
            const double unit = c.measured ? affine_test::kTolerance : ops_test::sum_rounding(c.in);
            ops_test::expect_within(
                c.entry == Entry::AffineMatmul ? "affine_matmul" : "linear_apply", what, got,
                expected, c.out, [&](size_t i) { return unit * scale[i] + 1e-6; });
            if (HasFailure()) return;
        }
    }

    ThreadPool pool_{0};
    ops_test::TestStream stream_;
};

const std::vector<int64_t> kDecodeAndPrefillRows = {1, 2, 3, 4, 5, 17, 64, 300};

// 131 and 300 output rows leave the last 128-row GEMM tile ragged; strided x and y rows.
TEST_F(OpsVsCpuLinear, AffineMatmulMatchesCpuForEveryBitWidthAndGroupSize) {
    const int64_t shapes[][2] = {{131, 640}, {300, 384}};
    for (const int bits : {2, 3, 4, 8}) {
        for (const int group_size : {32, 64, 128}) {
            for (const auto& shape : shapes) {
                LinearCase c =
                    affine_case("odd", Entry::AffineMatmul, shape[0], shape[1], bits, group_size);
                c.rows = kDecodeAndPrefillRows;
                c.x_pad = 4;
                c.y_pad = 3;
                check(c, static_cast<uint64_t>(bits * 131 + group_size));
                if (HasFailure()) return;
            }
        }
    }
}

// The model's projection shapes (Flash: hidden 2560, expert intermediate 640, GDN in_qkv rows
// 10240): every decode row count and one prefill size at Q4, decode and prefill at the other
// widths.
TEST_F(OpsVsCpuLinear, AffineMatmulMatchesCpuOnFlashShapes) {
    const int64_t shapes[][2] = {{10240, 2560}, {2560, 640}, {640, 2560}};
    for (const auto& shape : shapes) {
        for (const int bits : {2, 3, 4, 8}) {
            LinearCase c = affine_case("flash", Entry::AffineMatmul, shape[0], shape[1], bits, 64);
            c.rows = bits == 4 ? std::vector<int64_t>{1, 2, 3, 4, 64} : std::vector<int64_t>{1, 64};
            check(c, static_cast<uint64_t>(bits * 7 + shape[0]));
            if (HasFailure()) return;
        }
    }
}

// affine_matmul takes every row count: 1-4 through the GEMV when x is aligned, through the GEMM
// when it is not; 5-64 on this small matrix through GEMV chunks of 4; 65 through the GEMM.
TEST_F(OpsVsCpuLinear, AffineMatmulRoutesEveryRowCount) {
    for (const size_t x_offset : {size_t{0}, size_t{1}}) {
        LinearCase c = affine_case("routes", Entry::AffineMatmul, 333, 640, 4, 64);
        c.rows = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 63, 64, 65};
        c.x_pad = 5 * x_offset;
        c.y_pad = 2;
        c.x_offset = x_offset;
        c.measured = true;
        check(c, 5);
        if (HasFailure()) return;
    }
    // No rows: nothing written.
    const TestMatrix m = make_matrix(333, 640, 4, 64, 5);
    DeviceBuffer d_x(640 * sizeof(float));
    const DeviceBuffer d_y = ops_test::poisoned(333);
    affine_matmul(m.device(), d_x.as<float>(), 640, 0, d_y.as<float>(), 333, stream_.get());
    stream_.synchronize();
    const std::vector<float> untouched = ops_test::to_host(d_y, 333);
    EXPECT_TRUE(
        std::all_of(untouched.begin(), untouched.end(), [](float v) { return std::isnan(v); }));
}

// linear_apply: y = x·Wᵀ + b with contiguous rows, for a quantized and a float32 linear.
TEST_F(OpsVsCpuLinear, LinearApplyAddsBias) {
    LinearCase quantized = affine_case("bias", Entry::LinearApply, 640, 2560, 4, 64);
    quantized.bias = true;
    quantized.rows = {1, 3, 64};
    quantized.measured = true;
    check(quantized, 8);
    if (HasFailure()) return;
    LinearCase dense = f32_case("bias", 100, 96);
    dense.bias = true;
    dense.rows = {1, 3, 64};
    dense.measured = true;
    check(dense, 9);
}

// Float32 weights (routers, unquantized projections): 1-4 rows as the GEMV (one output row
// [1, 2560], split rows [512, 2560], columns not a multiple of 4), 5-64 rows as GEMV chunks, 300
// rows tiled with a ragged last K step (cols 99, 100).
TEST_F(OpsVsCpuLinear, LinearApplyMatchesCpuForFloatWeights) {
    const int64_t shapes[][2] = {{512, 2560}, {1, 2560}, {257, 99}, {40, 100}, {300, 64}};
    for (const auto& shape : shapes) {
        LinearCase c = f32_case("f32", shape[0], shape[1]);
        c.rows = {1, 2, 3, 4, 5, 64, 300};
        check(c, static_cast<uint64_t>(31 + shape[0]));
        if (HasFailure()) return;
    }
}

// Quantized linears at the other widths and groups, with bias, through linear_apply.
TEST_F(OpsVsCpuLinear, LinearApplyMatchesCpuForEveryBitWidth) {
    for (const int bits : {2, 3, 4, 8}) {
        for (const int group_size : {32, 64, 128}) {
            LinearCase c = affine_case("quantized", Entry::LinearApply, 257, 384, bits, group_size);
            c.bias = true;
            c.rows = {1, 4, 5, 65};
            check(c, static_cast<uint64_t>(bits * 10 + group_size));
            if (HasFailure()) return;
        }
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
