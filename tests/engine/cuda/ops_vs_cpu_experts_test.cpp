// The op-vs-CPU harness for the routed experts' SwiGLU (ops_vs_cpu.h):
// cuda::affine_experts_swiglu_parts (affine_gemv.h), the entry point moe.cu's decode takes for its
// experts, against the CPU composition of matmuls (engine/cpu/matmul.h) and engine::silu: each
// expert's h = silu(gate·x) ⊙ (up·x) and part = down·h, for 1-4 rows, every bit width and group
// size on an odd shape, the Flash shape, and a table whose count of entries in use comes from the
// device. Tolerances follow each rounding through the two stages. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_test.h"
#include "engine/cuda/ops_vs_cpu.h"
#include "engine/model/ops.h"

namespace cherenkov::engine::cuda {
namespace {

using affine_test::magnitudes;
using affine_test::make_matrix;
using affine_test::random_vector;
using affine_test::TestMatrix;
using ops_test::kUnitRoundoff;
using ops_test::sum_rounding;

// n_experts experts' gate, up [inter, hidden] and down [hidden, inter] on the host and the
// device, and their address table.
struct TestExperts {
    ExpertShape shape;
    std::vector<TestMatrix> gate, up, down;
    DeviceBuffer table;
};

TestExperts make_experts(int n_experts, int64_t hidden, int64_t inter, int bits, int group_size,
                         uint64_t seed) {
    TestExperts ex;
    ex.shape = ExpertShape{hidden, inter, bits, group_size};
    std::vector<ExpertAddress> table;
    for (int e = 0; e < n_experts; ++e) {
        const uint64_t s = seed + 3 * static_cast<uint64_t>(e);
        ex.gate.push_back(make_matrix(inter, hidden, bits, group_size, s));
        ex.up.push_back(make_matrix(inter, hidden, bits, group_size, s + 1));
        ex.down.push_back(make_matrix(hidden, inter, bits, group_size, s + 2));
    }
    for (int e = 0; e < n_experts; ++e) {
        const DeviceAffineMatrix g = ex.gate[static_cast<size_t>(e)].device();
        const DeviceAffineMatrix u = ex.up[static_cast<size_t>(e)].device();
        const DeviceAffineMatrix d = ex.down[static_cast<size_t>(e)].device();
        table.push_back(ExpertAddress{g.codes, g.scales, g.biases, u.codes, u.scales, u.biases,
                                      d.codes, d.scales, d.biases});
    }
    ex.table = DeviceBuffer(table.size() * sizeof(ExpertAddress));
    ex.table.upload(table.data(), table.size() * sizeof(ExpertAddress));
    return ex;
}

// One expert on the CPU for rows x [n_rows, hidden]: h and part, and how far the GPU's may be.
struct ExpertResult {
    std::vector<float> h;       // [n_rows, inter]
    std::vector<float> part;    // [n_rows, hidden]
    std::vector<double> h_err;  // bounds, per element
    std::vector<double> part_err;
};

// Bounds, stage by stage: gate·x and up·x within sum_rounding(hidden)·Σ(|w|+2|b|)|x| (the linear
// op's bound, ops_vs_cpu_linear_test.cpp); h = silu(g)·u moves by |silu'(g)| ≤ 1.1 times g's error
// times |u|, plus |silu(g)| times u's, plus six roundings of h (exp within 2 ulp on the device,
// 1 + e, the division, the product); part = down·h within sum_rounding(inter)·Σ(|w|+2|b|)|h| plus
// the rows of |down| applied to h's error.
ExpertResult cpu_expert(const TestExperts& ex, size_t e, const std::vector<float>& x, int n_rows,
                        ThreadPool* pool) {
    const auto hidden = static_cast<size_t>(ex.shape.hidden);
    const auto inter = static_cast<size_t>(ex.shape.intermediate);
    const auto rows = static_cast<size_t>(n_rows);
    std::vector<float> g(rows * inter), u(rows * inter);
    matmul(ex.gate[e].host(), x.data(), hidden, n_rows, g.data(), inter, pool);
    matmul(ex.up[e].host(), x.data(), hidden, n_rows, u.data(), inter, pool);
    const std::vector<double> g_mag = magnitudes(ex.gate[e], x, hidden, n_rows, pool);
    const std::vector<double> u_mag = magnitudes(ex.up[e], x, hidden, n_rows, pool);
    ExpertResult r;
    r.h.resize(g.size());
    r.h_err.resize(g.size());
    std::vector<float> h_err_floats(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
        const float activated = silu(g[i]);
        r.h[i] = activated * u[i];
        const double g_err = sum_rounding(ex.shape.hidden) * g_mag[i];
        const double u_err = sum_rounding(ex.shape.hidden) * u_mag[i];
        r.h_err[i] = 1.1 * g_err * std::fabs(u[i]) + std::fabs(activated) * u_err +
                     6.0 * kUnitRoundoff * std::fabs(r.h[i]) + 1e-30;
        h_err_floats[i] = static_cast<float>(r.h_err[i]);
    }
    r.part.resize(rows * hidden);
    matmul(ex.down[e].host(), r.h.data(), inter, n_rows, r.part.data(), hidden, pool);
    const std::vector<double> part_mag = magnitudes(ex.down[e], r.h, inter, n_rows, pool);
    const std::vector<double> carried = magnitudes(ex.down[e], h_err_floats, inter, n_rows, pool);
    r.part_err.resize(r.part.size());
    for (size_t i = 0; i < r.part.size(); ++i) {
        r.part_err[i] = sum_rounding(ex.shape.intermediate) * part_mag[i] + carried[i] + 1e-30;
    }
    return r;
}

class OpsVsCpuExperts : public DeviceTest {
protected:
    // Runs affine_experts_swiglu_parts over a table of `capacity` entries (`in_use` of them in use
    // by a device count when in_use < capacity) and checks every expert's h and part; the
    // entries past the count must stay untouched.
    void check(const TestExperts& ex, int capacity, int in_use, int n_rows, uint64_t seed,
               const std::string& name) {
        const auto hidden = static_cast<size_t>(ex.shape.hidden);
        const auto inter = static_cast<size_t>(ex.shape.intermediate);
        const auto rows = static_cast<size_t>(n_rows);
        const std::vector<float> x = random_vector(rows * hidden, seed);
        const DeviceBuffer d_x = ops_test::to_device(x);
        const auto n_h = static_cast<size_t>(capacity) * rows * inter;
        const auto n_parts = static_cast<size_t>(capacity) * rows * hidden;
        const DeviceBuffer d_h = ops_test::poisoned(n_h);
        const DeviceBuffer d_parts = ops_test::poisoned(n_parts);
        DeviceBuffer d_count(sizeof(int));
        d_count.upload(&in_use, sizeof(int));
        affine_experts_swiglu_parts(ex.shape, ex.table.as<const ExpertAddress>(), capacity,
                                    d_x.as<const float>(), n_rows, d_h.as<float>(),
                                    d_parts.as<float>(), stream_.get(),
                                    in_use < capacity ? d_count.as<const int>() : nullptr);
        stream_.synchronize();
        const std::vector<float> h = ops_test::to_host(d_h, n_h);
        const std::vector<float> parts = ops_test::to_host(d_parts, n_parts);

        const std::string shape = name + " [" + std::to_string(hidden) + "," +
                                  std::to_string(inter) + "] q" + std::to_string(ex.shape.bits) +
                                  " g" + std::to_string(ex.shape.group_size) + " rows " +
                                  std::to_string(n_rows);
        for (int e = 0; e < in_use; ++e) {
            const ExpertResult cpu = cpu_expert(ex, static_cast<size_t>(e), x, n_rows, &pool_);
            const auto h_first =
                h.begin() + static_cast<long>(static_cast<size_t>(e) * rows * inter);
            const auto p_first =
                parts.begin() + static_cast<long>(static_cast<size_t>(e) * rows * hidden);
            const std::string what = shape + " expert " + std::to_string(e);
            ops_test::expect_within(
                "affine_experts_swiglu_parts h", what,
                std::vector<float>(h_first, h_first + static_cast<long>(rows * inter)), cpu.h,
                static_cast<int64_t>(inter), [&](size_t i) { return cpu.h_err[i]; });
            ops_test::expect_within(
                "affine_experts_swiglu_parts part", what,
                std::vector<float>(p_first, p_first + static_cast<long>(rows * hidden)), cpu.part,
                static_cast<int64_t>(hidden), [&](size_t i) { return cpu.part_err[i]; });
            if (HasFailure()) return;
        }
        size_t written = 0;
        for (size_t i = static_cast<size_t>(in_use) * rows * inter; i < n_h; ++i) {
            written += std::isnan(h[i]) ? 0 : 1;
        }
        for (size_t i = static_cast<size_t>(in_use) * rows * hidden; i < n_parts; ++i) {
            written += std::isnan(parts[i]) ? 0 : 1;
        }
        EXPECT_EQ(written, 0U) << shape << ": entries past the device count were written";
    }

    ThreadPool pool_{0};
    ops_test::TestStream stream_;
};

TEST_F(OpsVsCpuExperts, MatchForEveryBitWidthAndGroupSize) {
    for (const int bits : {2, 3, 4, 8}) {
        for (const int group_size : {32, 64, 128}) {
            const TestExperts ex =
                make_experts(3, 384, 256, bits, group_size, 100 + bits * 10 + group_size);
            for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
                check(ex, 3, 3, n_rows, 7 + static_cast<uint64_t>(n_rows), "odd");
                if (HasFailure()) return;
            }
        }
    }
}

// Flash: hidden 2560, expert intermediate 640, eight experts (top-8 decode).
TEST_F(OpsVsCpuExperts, MatchOnTheFlashShape) {
    for (const int bits : {2, 3, 4}) {
        const TestExperts ex = make_experts(8, 2560, 640, bits, 64, 500 + bits);
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            check(ex, 8, 8, n_rows, 17 + static_cast<uint64_t>(n_rows), "flash");
            if (HasFailure()) return;
        }
    }
}

// The address table routed on the device: only the entries the device count says are in use.
TEST_F(OpsVsCpuExperts, StopAtTheDeviceCount) {
    for (const int bits : {3, 4}) {
        const TestExperts ex = make_experts(5, 2560, 640, bits, 64, 700 + bits);
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            check(ex, 5, 3, n_rows, 27 + static_cast<uint64_t>(n_rows), "counted");
            if (HasFailure()) return;
        }
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
