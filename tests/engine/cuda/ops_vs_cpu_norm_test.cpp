// The op-vs-CPU harness for the elementwise ops (ops_vs_cpu.h): cuda::rms_norm_rows and
// cuda::gated_rms_norm_rows (device_ops.cu) against engine::grouped_rms_norm and the CPU's gate
// (engine/model/ops.h), and cuda::hyper_connection_combine against engine's, over a table of
// shapes: the model's norms (a hidden row, C·H grouped by H, heads of dv), groups that fit one
// row slice and groups that loop, odd sizes, no weight, and in place.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_test.h"
#include "engine/cuda/ops_vs_cpu.h"
#include "engine/model/layers.h"
#include "engine/model/ops.h"

namespace cherenkov::engine::cuda {
namespace {

using ops_test::kUnitRoundoff;

std::vector<float> random_values(size_t n, float scale, uint64_t seed) {
    std::vector<float> values = affine_test::random_vector(n, seed);
    for (float& v : values) v *= scale;
    return values;
}

// One norm call: n_rows rows of n values, one statistic per `group`.
struct NormShape {
    const char* name;
    int64_t n_rows;
    int64_t n;
    int64_t group;
};

// A hidden row (Flash H 2560), the hyper-connection norm (C·H = 4·2560, grouped by H), GDN heads
// (dv 128, 48 heads per row, T 37), odd groups (80: a partial warp; 3000: longer than a row slice,
// so the loop form), and a tiny model's rows.
constexpr NormShape kNormShapes[] = {
    {"hidden", 1, 2560, 2560}, {"hc", 3, 10240, 2560},        {"gdn_heads", 37, 6144, 128},
    {"odd_group", 5, 400, 80}, {"long_group", 2, 6000, 3000}, {"tiny", 4, 192, 64},
};

constexpr float kEps = 1e-6F;

// Relative bound on a norm output: the sum of n squares differs by sum_rounding(n) of itself
// (all terms positive, so Σ|terms| is the sum), which the square root halves; sqrt, the
// division and the two products add a rounding each per side.
double norm_relative_bound(int64_t n) {
    return ops_test::sum_rounding(n) / 2.0 + 8.0 * kUnitRoundoff;
}

class OpsVsCpuNorm : public DeviceTest {
protected:
    // y on the device for x [n_rows, n] (w: [n] or empty; gate: [n_rows, n] or empty), in place
    // when `in_place`.
    std::vector<float> device_norm(const NormShape& s, const std::vector<float>& x,
                                   const std::vector<float>& w, const std::vector<float>& gate,
                                   bool sigmoid_gate, bool in_place) {
        const DeviceBuffer d_x = ops_test::to_device(x);
        const DeviceBuffer d_w = ops_test::to_device(w);
        const DeviceBuffer d_gate = ops_test::to_device(gate);
        const DeviceBuffer d_y = ops_test::poisoned(x.size());
        float* y = in_place ? d_x.as<float>() : d_y.as<float>();
        const float* weight = w.empty() ? nullptr : d_w.as<const float>();
        if (gate.empty()) {
            rms_norm_rows(d_x.as<const float>(), weight, s.n_rows, s.n, s.group, kEps, y,
                          stream_.get());
        } else {
            gated_rms_norm_rows(d_x.as<const float>(), weight, d_gate.as<const float>(),
                                sigmoid_gate, s.n_rows, s.n, s.group, kEps, y, stream_.get());
        }
        stream_.synchronize();
        return ops_test::to_host(in_place ? d_x : d_y, x.size());
    }

    ops_test::TestStream stream_;
};

TEST_F(OpsVsCpuNorm, RmsNormRowsMatchesCpu) {
    uint64_t seed = 1;
    for (const NormShape& s : kNormShapes) {
        for (const bool weighted : {true, false}) {
            for (const bool in_place : {false, true}) {
                const auto size = static_cast<size_t>(s.n_rows * s.n);
                const std::vector<float> x = random_values(size, 3.0F, ++seed);
                std::vector<float> w;
                if (weighted) {
                    w = random_values(static_cast<size_t>(s.n), 0.5F, ++seed);
                    for (float& v : w) v += 1.0F;
                }
                std::vector<float> expected(size);
                for (int64_t t = 0; t < s.n_rows; ++t) {
                    grouped_rms_norm(x.data() + t * s.n, weighted ? w.data() : nullptr, s.n,
                                     s.group, kEps, expected.data() + t * s.n);
                }
                const std::vector<float> got = device_norm(s, x, w, {}, false, in_place);
                const double relative = norm_relative_bound(s.group);
                const std::string shape =
                    std::string(s.name) + " [" + std::to_string(s.n_rows) + "," +
                    std::to_string(s.n) + "] group " + std::to_string(s.group) +
                    (weighted ? " weighted" : " unweighted") + (in_place ? " in place" : "");
                ops_test::expect_within("rms_norm_rows", shape, got, expected, s.n, [&](size_t i) {
                    return relative * std::fabs(expected[i]) + 1e-30;
                });
                if (HasFailure()) return;
            }
        }
    }
}

// The GDN output norm: y = rms_norm(x)·w, then · sigmoid(z) or silu(z) (docs/qwen4_exp.md §3.5).
TEST_F(OpsVsCpuNorm, GatedRmsNormRowsMatchesCpu) {
    uint64_t seed = 100;
    for (const NormShape& s : kNormShapes) {
        for (const bool sigmoid_gate : {true, false}) {
            const auto size = static_cast<size_t>(s.n_rows * s.n);
            const std::vector<float> x = random_values(size, 3.0F, ++seed);
            std::vector<float> w = random_values(static_cast<size_t>(s.n), 0.5F, ++seed);
            for (float& v : w) v += 1.0F;
            const std::vector<float> gate = random_values(size, 6.0F, ++seed);
            std::vector<float> expected(size);
            for (int64_t t = 0; t < s.n_rows; ++t) {
                grouped_rms_norm(x.data() + t * s.n, w.data(), s.n, s.group, kEps,
                                 expected.data() + t * s.n);
            }
            for (size_t i = 0; i < size; ++i) {
                expected[i] *= sigmoid_gate ? sigmoid(gate[i]) : silu(gate[i]);
            }
            const std::vector<float> got = device_norm(s, x, w, gate, sigmoid_gate, false);
            // The gate: exp within 2 ulp on the device (CUDA's expf) and 1 on the host, a
            // rounding each for 1 + e, the division and the product.
            const double relative = norm_relative_bound(s.group) + 8.0 * kUnitRoundoff;
            const std::string shape = std::string(s.name) + " [" + std::to_string(s.n_rows) + "," +
                                      std::to_string(s.n) + "] group " + std::to_string(s.group) +
                                      (sigmoid_gate ? " sigmoid" : " silu");
            ops_test::expect_within(
                "gated_rms_norm_rows", shape, got, expected, s.n,
                [&](size_t i) { return relative * std::fabs(expected[i]) + 1e-30; });
            if (HasFailure()) return;
        }
    }
}

// x[t, s·H + d] += w[t, s]·y[t, d]: the Flash shape (C 4, H 2560) at decode and prefill rows,
// and the fixtures' stream counts on odd widths.
TEST_F(OpsVsCpuNorm, HyperConnectionCombineMatchesCpu) {
    struct Shape {
        int64_t n_rows, n_streams, hidden;
    };
    const Shape shapes[] = {{1, 4, 2560}, {3, 4, 2560}, {37, 3, 64}, {5, 2, 100}};
    uint64_t seed = 200;
    for (const Shape& s : shapes) {
        const auto width = static_cast<size_t>(s.n_streams * s.hidden);
        const std::vector<float> x =
            random_values(static_cast<size_t>(s.n_rows) * width, 4.0F, ++seed);
        const std::vector<float> inject =
            random_values(static_cast<size_t>(s.n_rows * s.n_streams), 2.0F, ++seed);
        const std::vector<float> y =
            random_values(static_cast<size_t>(s.n_rows * s.hidden), 4.0F, ++seed);
        std::vector<float> expected = x;
        engine::hyper_connection_combine(expected.data(), inject.data(), y.data(), s.n_rows,
                                         s.n_streams, s.hidden);
        const DeviceBuffer d_x = ops_test::to_device(x);
        const DeviceBuffer d_inject = ops_test::to_device(inject);
        const DeviceBuffer d_y = ops_test::to_device(y);
        cuda::hyper_connection_combine(d_x.as<float>(), d_inject.as<const float>(),
                                       d_y.as<const float>(), s.n_rows, s.n_streams, s.hidden,
                                       stream_.get());
        stream_.synchronize();
        const std::vector<float> got = ops_test::to_host(d_x, x.size());
        // One product and one sum per element: the host rounds both, the device may fuse them,
        // so each side is within u·|w·y| + u·|x + w·y| of the exact value.
        const auto bound = [&](size_t i) {
            const size_t t = i / width;
            const size_t stream = (i % width) / static_cast<size_t>(s.hidden);
            const size_t d = i % static_cast<size_t>(s.hidden);
            const double product = std::fabs(static_cast<double>(inject[t * s.n_streams + stream]) *
                                             y[t * static_cast<size_t>(s.hidden) + d]);
            return 3.0 * kUnitRoundoff * (std::fabs(x[i]) + product) + 1e-30;
        };
        ops_test::expect_within("hyper_connection_combine",
                                "[" + std::to_string(s.n_rows) + "," + std::to_string(s.n_streams) +
                                    "," + std::to_string(s.hidden) + "]",
                                got, expected, static_cast<int64_t>(width), bound);
        if (HasFailure()) return;
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
