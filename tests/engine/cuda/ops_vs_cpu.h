// The op-vs-CPU harness (tests/engine/cuda/ops_vs_cpu_*_test.cpp): every CUDA op the model calls,
// through the launchers of engine/cuda (device_layers.cuh, affine_gemm.h, ...), against the CPU
// definition of engine/model and engine/cpu over a table of shapes. This header holds what the
// op files share: device streams and copies, the rounding bounds tolerances are built from, and
// an element-wise comparison that names the op, the shape and the worst element. The harness
// includes CUDA runtime headers, so CMake compiles it only in builds with CUDA
// (cmake/layers.cmake); without a device its tests skip (DeviceTest).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/device_buffer.h"

namespace cherenkov::engine::cuda::ops_test {

// ---- rounding bounds ----
// u: the unit roundoff of float32.
constexpr double kUnitRoundoff = 0x1p-24;
// λ of the probabilistic bound below; a sum exceeds it with probability under
// n·2·exp(−λ²/2) ≈ n·2.5e-14, so a table of millions of elements still passes by a wide margin.
constexpr double kLambda = 8.0;

// Two float32 evaluations of an n-term sum (products rounded first) in any two orders differ by
// at most this times Σ|terms|: each stays within λ·√n·u·Σ|terms| of the exact sum, treating the
// roundings as independent mean-zero errors (Higham and Mary, "A new approach to probabilistic
// rounding error analysis", SIAM J. Sci. Comput. 2019, Theorem 2.4). The worst case n·u is far
// looser and never met by random data; an indexing bug moves an output by ~Σ|terms|/√n, which
// this stays far below for every n the model has.
inline double sum_rounding(int64_t n) {
    return 2.0 * kLambda * std::sqrt(static_cast<double>(n) + 1.0) * kUnitRoundoff;
}

// Relative to the size of a layer's output (its rms, plus the element's own size), the most a
// layer that chains `stages` reductions of at most n terms may move between the CPU and the GPU:
// each reduction adds sum_rounding(n)·Σ|terms|, and Σ|terms| of the random-sign terms of these
// tests is about √n times the size of their sum, the size the layer's normalized maps pass on
// from stage to stage (norms, unit-gain projections, sigmoid and silu with slopes ≤ 1.1).
inline double layer_rounding(int64_t n, int stages) {
    return stages * sum_rounding(n) * std::sqrt(static_cast<double>(n));
}

inline double rms(const std::vector<float>& values) {
    double sum = 0.0;
    for (const float v : values) sum += static_cast<double>(v) * v;
    return values.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(values.size()));
}

// ---- device plumbing ----
// A stream owned by the test (the launchers take it as cudaStream_t or void*), made on first use
// so that a fixture holding one still skips cleanly on a machine without a device. It is a
// blocking stream: its work starts after what DeviceBuffer's copies queued on the legacy default
// stream.
class TestStream {
public:
    TestStream() = default;
    ~TestStream() {
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }
    TestStream(const TestStream&) = delete;
    TestStream& operator=(const TestStream&) = delete;

    cudaStream_t get() const {
        if (stream_ == nullptr) CHERENKOV_CUDA_CHECK(cudaStreamCreate(&stream_));
        return stream_;
    }
    void synchronize() const { CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(get())); }

private:
    mutable cudaStream_t stream_ = nullptr;
};

// A device copy of `values` (at least one float, so empty inputs still have an address).
inline DeviceBuffer to_device(const std::vector<float>& values) {
    DeviceBuffer buffer(std::max<size_t>(1, values.size()) * sizeof(float));
    if (!values.empty()) buffer.upload(values.data(), values.size() * sizeof(float));
    return buffer;
}

// A device array of n floats, every one NaN, so an output the op never writes fails the check.
inline DeviceBuffer poisoned(size_t n) {
    DeviceBuffer buffer(std::max<size_t>(1, n) * sizeof(float));
    buffer.fill(0xFF);
    return buffer;
}

inline std::vector<float> to_host(const DeviceBuffer& buffer, size_t n) {
    std::vector<float> values(n);
    if (n > 0) buffer.download(values.data(), n * sizeof(float));
    return values;
}

// ---- comparison ----
// got[i] must lie within bound(i) of expected[i] (NaN fails). On failure the message names the op
// and shape, the element (row and column of a [n / width, width] layout) and both values; either
// way one line reports the largest |diff| / bound, so a run shows how much room each op has
// (scripts/gpu_run_tests.sh picks failures out of the log by "worst", so passing lines avoid the
// word). Returns that ratio.
inline double expect_within(const std::string& op, const std::string& shape,
                            const std::vector<float>& got, const std::vector<float>& expected,
                            int64_t width, const std::function<double(size_t)>& bound) {
    EXPECT_EQ(got.size(), expected.size()) << op << " " << shape;
    if (got.size() != expected.size()) return std::numeric_limits<double>::infinity();
    double worst = 0.0;
    size_t worst_index = 0;
    size_t n_failed = 0;
    size_t first_failed = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(got[i]) - expected[i]);
        const double limit = bound(i);
        const double ratio = limit > 0.0 ? diff / limit : (diff == 0.0 ? 0.0 : HUGE_VAL);
        if (!(diff <= limit)) {  // NaN fails too
            if (n_failed++ == 0) first_failed = i;
            if (!(ratio <= worst)) {
                worst = std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio;
                worst_index = i;
            }
            continue;
        }
        if (ratio > worst) {
            worst = ratio;
            worst_index = i;
        }
    }
    const auto w = static_cast<size_t>(std::max<int64_t>(1, width));
    const auto where = [&](size_t i) {
        return "[" + std::to_string(i / w) + ", " + std::to_string(i % w) + "] gpu " +
               std::to_string(got[i]) + " cpu " + std::to_string(expected[i]) + " bound " +
               std::to_string(bound(i));
    };
    if (!got.empty()) {
        std::printf("[ops_vs_cpu] %s %s: largest |gpu-cpu|/bound %.3g at %s\n", op.c_str(),
                    shape.c_str(), worst, where(worst_index).c_str());
    }
    EXPECT_EQ(n_failed, 0U) << op << " " << shape << ": " << n_failed << " of " << got.size()
                            << " elements out of bounds; first " << where(first_failed)
                            << "; worst " << where(worst_index);
    return worst;
}

// expect_within with bound relative·(rms(expected) + |expected[i]|): a layer's output.
inline double expect_within_layer(const std::string& op, const std::string& shape,
                                  const std::vector<float>& got, const std::vector<float>& expected,
                                  int64_t width, double relative) {
    const double scale = rms(expected);
    return expect_within(op, shape, got, expected, width, [&](size_t i) {
        return relative * (scale + std::fabs(expected[i])) + 1e-30;
    });
}

// expect_within with one bound for every element.
inline double expect_within(const std::string& op, const std::string& shape,
                            const std::vector<float>& got, const std::vector<float>& expected,
                            int64_t width, double bound) {
    return expect_within(op, shape, got, expected, width, [bound](size_t) { return bound; });
}

}  // namespace cherenkov::engine::cuda::ops_test
