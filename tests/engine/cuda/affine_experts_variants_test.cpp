// Every ExpertKernel (engine/cuda/affine_experts_variants.h) against a CPU composition of matmuls
// (gate, up, SwiGLU, down, weighted sum), on both entry points, every bit width and group size,
// 1-4 rows; bitwise reproducibility; and, without CUDA, that calls say so.
#include "engine/cuda/affine_experts_variants.h"

#include <gtest/gtest.h>

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

namespace cherenkov::engine::cuda {
namespace {

using affine_test::kTolerance;
using affine_test::magnitudes;
using affine_test::make_matrix;
using affine_test::random_vector;
using affine_test::TestMatrix;
using affine_test::uniform;

class CudaExpertVariants : public ::testing::Test {
protected:
    void SetUp() override {
        const DeviceQuery query = query_devices();
        if (query.devices.empty()) GTEST_SKIP() << "no CUDA device: " << query.unavailable_reason;
    }
    ThreadPool pool_{0};
};

struct TestExperts {
    ExpertShape shape;
    std::vector<TestMatrix> gate, up, down;
    DeviceBuffer d_table;
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
        const DeviceAffineMatrix g = ex.gate[e].device();
        const DeviceAffineMatrix u = ex.up[e].device();
        const DeviceAffineMatrix d = ex.down[e].device();
        table.push_back(ExpertAddress{g.codes, g.scales, g.biases, u.codes, u.scales, u.biases,
                                      d.codes, d.scales, d.biases});
    }
    ex.d_table = DeviceBuffer(table.size() * sizeof(ExpertAddress));
    ex.d_table.upload(table.data(), table.size() * sizeof(ExpertAddress));
    return ex;
}

// parts[e][t] = down_e(silu(gate_e·x_t)·(up_e·x_t)) on the CPU, and the tolerance scale of each
// (as affine_gemv_test's cpu_experts: h's rounding counted as 10× the down terms).
void cpu_parts(const TestExperts& ex, int n_experts, const std::vector<float>& x, int n_rows,
               std::vector<float>* parts, std::vector<double>* scale, ThreadPool* pool) {
    const auto hidden = static_cast<size_t>(ex.shape.hidden);
    const auto inter = static_cast<size_t>(ex.shape.intermediate);
    std::vector<float> g(n_rows * inter), u(n_rows * inter);
    parts->assign(static_cast<size_t>(n_experts) * n_rows * hidden, 0.0F);
    scale->assign(parts->size(), 0.0);
    for (int e = 0; e < n_experts; ++e) {
        matmul(ex.gate[e].host(), x.data(), hidden, n_rows, g.data(), inter, pool);
        matmul(ex.up[e].host(), x.data(), hidden, n_rows, u.data(), inter, pool);
        for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0F + std::exp(-g[i])) * u[i];
        float* out = parts->data() + static_cast<size_t>(e) * n_rows * hidden;
        matmul(ex.down[e].host(), g.data(), inter, n_rows, out, hidden, pool);
        const std::vector<double> mag = magnitudes(ex.down[e], g, inter, n_rows, pool);
        for (size_t i = 0; i < mag.size(); ++i) {
            (*scale)[static_cast<size_t>(e) * n_rows * hidden + i] = 10.0 * mag[i];
        }
    }
}

std::string name(ExpertKernel kernel) {
    return expert_kernel_name(kernel);
}

TEST_F(CudaExpertVariants, PartsMatchCpuComposition) {
    const int n_experts = 5;
    for (const int bits : {2, 3, 4, 8}) {
        for (const int group_size : {64, 32, 128}) {
            const TestExperts ex =
                make_experts(n_experts, 2560, 640, bits, group_size, 500 + bits * 10 + group_size);
            for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
                const auto x = random_vector(static_cast<size_t>(n_rows) * 2560, 7 + n_rows);
                std::vector<float> expected;
                std::vector<double> scale;
                cpu_parts(ex, n_experts, x, n_rows, &expected, &scale, &pool_);
                DeviceBuffer d_x(x.size() * 4), d_parts(expected.size() * 4);
                DeviceBuffer d_h(static_cast<size_t>(n_experts) * n_rows * 640 * 4);
                d_x.upload(x.data(), x.size() * 4);
                for (const ExpertKernel kernel : kExpertKernels) {
                    d_parts.fill(0xFF);  // NaN: an unwritten output fails
                    d_h.fill(0xFF);
                    affine_experts_swiglu_parts_variant(
                        kernel, ex.shape, ex.d_table.as<ExpertAddress>(), n_experts,
                        d_x.as<float>(), n_rows, d_h.as<float>(), d_parts.as<float>(), nullptr);
                    std::vector<float> got(expected.size());
                    d_parts.download(got.data(), got.size() * 4);
                    for (size_t i = 0; i < got.size(); ++i) {
                        const double diff = std::fabs(static_cast<double>(got[i]) - expected[i]);
                        ASSERT_LE(diff, kTolerance * scale[i] + 1e-6)
                            << name(kernel) << " bits=" << bits << " group=" << group_size
                            << " n_rows=" << n_rows << " i=" << i << " gpu=" << got[i]
                            << " cpu=" << expected[i];
                    }
                }
            }
        }
    }
}

// The full block (with the weighted sum) on 16 experts, the MoE's largest decode group.
TEST_F(CudaExpertVariants, SwigluMatchesCpuComposition) {
    const int n_experts = 16;
    for (const int bits : {4, 2}) {
        const TestExperts ex = make_experts(n_experts, 2560, 640, bits, 64, 900 + bits);
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            const size_t hidden = 2560;
            const auto x = random_vector(n_rows * hidden, 70 + n_rows);
            std::vector<float> weights(static_cast<size_t>(n_experts) * n_rows);
            uint64_t state = 5 + n_rows;
            for (float& w : weights) w = std::max(uniform(state), 0.0F);
            const auto y0 = random_vector(n_rows * hidden, 99);
            std::vector<float> parts;
            std::vector<double> part_scale;
            cpu_parts(ex, n_experts, x, n_rows, &parts, &part_scale, &pool_);
            std::vector<float> expected = y0;
            std::vector<double> scale(y0.size(), 0.0);
            for (int e = 0; e < n_experts; ++e) {
                for (int t = 0; t < n_rows; ++t) {
                    const float w = weights[static_cast<size_t>(e) * n_rows + t];
                    if (w == 0.0F) continue;
                    for (size_t d = 0; d < hidden; ++d) {
                        const size_t p = (static_cast<size_t>(e) * n_rows + t) * hidden + d;
                        expected[t * hidden + d] += w * parts[p];
                        scale[t * hidden + d] += w * part_scale[p];
                    }
                }
            }
            DeviceBuffer d_x(x.size() * 4), d_w(weights.size() * 4), d_y(y0.size() * 4);
            DeviceBuffer d_scratch(affine_experts_scratch_floats(ex.shape, n_experts, n_rows) * 4);
            d_x.upload(x.data(), x.size() * 4);
            d_w.upload(weights.data(), weights.size() * 4);
            for (const ExpertKernel kernel : kExpertKernels) {
                d_y.upload(y0.data(), y0.size() * 4);
                d_scratch.fill(0xFF);
                affine_experts_swiglu_variant(
                    kernel, ex.shape, ex.d_table.as<ExpertAddress>(), d_w.as<float>(), n_experts,
                    d_x.as<float>(), n_rows, d_scratch.as<float>(), d_y.as<float>(), true, nullptr);
                std::vector<float> got(y0.size());
                d_y.download(got.data(), got.size() * 4);
                for (size_t i = 0; i < got.size(); ++i) {
                    const double diff = std::fabs(static_cast<double>(got[i]) - expected[i]);
                    ASSERT_LE(diff, kTolerance * scale[i] + 1e-6 * (1.0 + std::fabs(y0[i])))
                        << name(kernel) << " bits=" << bits << " n_rows=" << n_rows << " i=" << i
                        << " gpu=" << got[i] << " cpu=" << expected[i];
                }
            }
        }
    }
}

// Same inputs, same bits, also across repeated calls of C (its counters reset themselves).
TEST_F(CudaExpertVariants, ResultsAreBitwiseReproducible) {
    const TestExperts ex = make_experts(10, 2560, 640, 4, 64, 31);
    const auto x = random_vector(size_t{4} * 2560, 4);
    DeviceBuffer d_x(x.size() * 4), d_h(size_t{10} * 4 * 640 * 4),
        d_parts(size_t{10} * 4 * 2560 * 4);
    d_x.upload(x.data(), x.size() * 4);
    for (const ExpertKernel kernel : kExpertKernels) {
        std::vector<float> first(size_t{10} * 4 * 2560), later(first.size());
        for (int run = 0; run < 4; ++run) {
            d_parts.fill(0xFF);
            affine_experts_swiglu_parts_variant(kernel, ex.shape, ex.d_table.as<ExpertAddress>(),
                                                10, d_x.as<float>(), 4, d_h.as<float>(),
                                                d_parts.as<float>(), nullptr);
            d_parts.download((run == 0 ? first : later).data(), first.size() * 4);
            if (run > 0) {
                EXPECT_EQ(std::memcmp(first.data(), later.data(), first.size() * 4), 0)
                    << name(kernel) << " run " << run;
            }
        }
    }
}

TEST(CudaExpertVariantsUnavailable, CallsSayBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    EXPECT_THROW(affine_experts_swiglu_parts_variant(ExpertKernel::A, ExpertShape{}, nullptr, 1,
                                                     nullptr, 1, nullptr, nullptr, nullptr),
                 Error);
    EXPECT_THROW(affine_experts_swiglu_variant(ExpertKernel::C, ExpertShape{}, nullptr, nullptr, 1,
                                               nullptr, 1, nullptr, nullptr, false, nullptr),
                 Error);
}

}  // namespace
}  // namespace cherenkov::engine::cuda
