// GPU affine GEMV (engine/cuda/affine_gemv.h) against the CPU matmul: every bit width × group
// size × 1-4 rows on odd shapes and on the Flash shapes, the expert SwiGLU path against a CPU
// composition of matmuls, and bitwise reproducibility. Skips without a device; in a build without
// CUDA it checks that calls say so.
#include "engine/cuda/affine_gemv.h"

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
#include "engine/cuda/affine_gemv_bulk.h"
#include "engine/cuda/affine_gemv_mma.h"
#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_test.h"
#include "engine/cuda/expert_layer.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kBits[] = {2, 3, 4, 8};

// The tolerance, matrices and inputs of affine_test_matrix.h; the GPU sums as scale·Σqx + bias·Σx
// per 32 columns.
using affine_test::kTolerance;
using affine_test::magnitudes;
using affine_test::make_matrix;
using affine_test::random_vector;
using affine_test::TestMatrix;
using affine_test::uniform;

class CudaAffineGemv : public DeviceTest {
protected:
    ThreadPool pool_{0};
};

struct ErrorStats {
    double max_relative = 0.0;  // max |gpu − cpu| / magnitude
    double max_absolute = 0.0;
};

// Runs the GPU kernel for n_rows = 1..4 over x [4, x_stride] and checks each against the CPU
// matmul of all 4 rows (the CPU's per-output order does not depend on the batch).
ErrorStats check_dense(const TestMatrix& m, size_t x_stride, size_t y_stride, uint64_t seed,
                       ThreadPool* pool, const std::string& what) {
    ErrorStats stats;
    const auto x = random_vector(x_stride * kMaxGemvRows, seed);
    std::vector<float> expected(y_stride * kMaxGemvRows);
    matmul(m.host(), x.data(), x_stride, kMaxGemvRows, expected.data(), y_stride, pool);
    const std::vector<double> scale = magnitudes(m, x, x_stride, kMaxGemvRows, pool);
    DeviceBuffer d_x(x.size() * sizeof(float));
    d_x.upload(x.data(), x.size() * sizeof(float));
    DeviceBuffer d_y(expected.size() * sizeof(float));
    std::vector<float> got(expected.size());
    for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
        d_y.fill(0xFF);  // NaN: an unwritten output fails
        affine_gemv(m.device(), d_x.as<float>(), x_stride, n_rows, d_y.as<float>(), y_stride,
                    nullptr);
        d_y.download(got.data(), got.size() * sizeof(float));
        for (int t = 0; t < n_rows; ++t) {
            for (int64_t row = 0; row < m.rows; ++row) {
                const size_t index = t * y_stride + static_cast<size_t>(row);
                const double diff = std::fabs(static_cast<double>(got[index]) - expected[index]);
                const double bound =
                    kTolerance * scale[static_cast<size_t>(t * m.rows + row)] + 1e-6;
                EXPECT_LE(diff, bound)
                    << what << " n_rows=" << n_rows << " t=" << t << " row=" << row
                    << " gpu=" << got[index] << " cpu=" << expected[index];
                if (diff > bound) return stats;
                stats.max_absolute = std::max(stats.max_absolute, diff);
                stats.max_relative = std::max(stats.max_relative,
                                              diff / scale[static_cast<size_t>(t * m.rows + row)]);
            }
        }
    }
    return stats;
}

TEST_F(CudaAffineGemv, MatchesCpuForEveryBitWidthGroupSizeAndRowCountOnOddShapes) {
    ErrorStats worst;
    for (const int bits : kBits) {
        for (const int group_size : {32, 64, 128}) {
            // Odd row counts (partial warps), column counts that leave lanes idle or use one piece.
            // {3, 25600}: x past the shared-memory limit from 1 row on (the device-memory path).
            // {8200, 384}: tall enough for the tensor-core kernel, with a partial last tile.
            const int64_t shapes[][2] = {{13, int64_t{3} * group_size},
                                         {77, 640},
                                         {5, 1056},
                                         {200, 256},
                                         {3, 25600},
                                         {8200, 384}};
            for (const auto& shape : shapes) {
                if (shape[1] % group_size != 0) continue;
                const TestMatrix m =
                    make_matrix(shape[0], shape[1], bits, group_size, bits * 131 + group_size);
                const std::string what =
                    "bits=" + std::to_string(bits) + " group=" + std::to_string(group_size) +
                    " shape=[" + std::to_string(shape[0]) + "," + std::to_string(shape[1]) + "]";
                const ErrorStats s =
                    check_dense(m, static_cast<size_t>(shape[1]) + 4,
                                static_cast<size_t>(shape[0]) + 3, bits + 7, &pool_, what);
                if (HasFailure()) return;
                worst.max_relative = std::max(worst.max_relative, s.max_relative);
                worst.max_absolute = std::max(worst.max_absolute, s.max_absolute);
            }
        }
    }
    std::printf("odd shapes: max |gpu-cpu| %.3g, max relative to Σ|w·x| %.3g\n", worst.max_absolute,
                worst.max_relative);
}

TEST_F(CudaAffineGemv, MatchesCpuOnFlashShapes) {
    const int64_t shapes[][2] = {{10240, 2560}, {2560, 6144}, {640, 2560}, {2560, 640}};
    for (const auto& shape : shapes) {
        for (const int bits : kBits) {
            const TestMatrix m =
                make_matrix(shape[0], shape[1], bits, 64,
                            static_cast<uint64_t>(bits) * 7 + static_cast<uint64_t>(shape[0]));
            const std::string what = "bits=" + std::to_string(bits) + " shape=[" +
                                     std::to_string(shape[0]) + "," + std::to_string(shape[1]) +
                                     "]";
            const ErrorStats s = check_dense(m, static_cast<size_t>(shape[1]),
                                             static_cast<size_t>(shape[0]), bits + 3, &pool_, what);
            if (HasFailure()) return;
            std::printf("%s: max |gpu-cpu| %.3g, max relative to Σ|w·x| %.3g\n", what.c_str(),
                        s.max_absolute, s.max_relative);
        }
    }
}

// A set of experts [I, H] / [H, I] on the device and its address table.
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
        ex.gate.push_back(
            make_matrix(inter, hidden, bits, group_size, seed + 3 * static_cast<uint64_t>(e)));
        ex.up.push_back(
            make_matrix(inter, hidden, bits, group_size, seed + 3 * static_cast<uint64_t>(e) + 1));
        ex.down.push_back(
            make_matrix(hidden, inter, bits, group_size, seed + 3 * static_cast<uint64_t>(e) + 2));
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

// Row weights [E, R]: each row uses about half of the experts, with zeros elsewhere.
std::vector<float> routing_weights(int n_experts, int n_rows, uint64_t seed) {
    uint64_t state = seed;
    std::vector<float> w(static_cast<size_t>(n_experts * n_rows));
    for (float& v : w) {
        const float u = uniform(state);
        v = u < 0.0F ? 0.0F : u;
    }
    return w;
}

// y[t] = y0[t] + Σ_e w[e][t]·down_e(silu(gate_e·x_t)·(up_e·x_t)) with the CPU matmul; also the
// scale Σ_e |w|·(|down_e|·|h|) for the tolerance (h itself recomputed in double is not needed:
// its error enters through down and is bounded the same way).
void cpu_experts(const TestExperts& ex, const std::vector<float>& weights, int n_experts,
                 const std::vector<float>& x, int n_rows, std::vector<float>* y,
                 std::vector<double>* scale, ThreadPool* pool) {
    const auto hidden = static_cast<size_t>(ex.shape.hidden);
    const auto inter = static_cast<size_t>(ex.shape.intermediate);
    std::vector<float> g(n_rows * inter), u(n_rows * inter), out(n_rows * hidden);
    for (int e = 0; e < n_experts; ++e) {
        matmul(ex.gate[e].host(), x.data(), hidden, n_rows, g.data(), inter, pool);
        matmul(ex.up[e].host(), x.data(), hidden, n_rows, u.data(), inter, pool);
        for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0F + std::exp(-g[i])) * u[i];
        matmul(ex.down[e].host(), g.data(), inter, n_rows, out.data(), hidden, pool);
        const std::vector<double> mag = magnitudes(ex.down[e], g, inter, n_rows, pool);
        for (int t = 0; t < n_rows; ++t) {
            const float w = weights[static_cast<size_t>(e) * n_rows + t];
            if (w == 0.0F) continue;
            for (size_t d = 0; d < hidden; ++d) {
                (*y)[t * hidden + d] += w * out[t * hidden + d];
                // h carries the gate/up rounding (~1e-6 relative): counted as 10× the down terms.
                (*scale)[t * hidden + d] += 10.0 * w * mag[t * hidden + d];
            }
        }
    }
}

// The per-expert outputs the engine's MoE layer gets (affine_experts_swiglu_parts) for the first
// n_rows rows of d_x: [n_experts, n_rows, hidden].
std::vector<float> expert_parts(const TestExperts& ex, int n_experts, const float* d_x,
                                int n_rows) {
    const auto hidden = static_cast<size_t>(ex.shape.hidden);
    const auto inter = static_cast<size_t>(ex.shape.intermediate);
    const size_t rows = static_cast<size_t>(n_experts) * static_cast<size_t>(n_rows);
    DeviceBuffer d_h(rows * inter * 4), d_parts(rows * hidden * 4);
    d_h.fill(0xFF);
    d_parts.fill(0xFF);
    affine_experts_swiglu_parts(ex.shape, ex.d_table.as<ExpertAddress>(), n_experts, d_x, n_rows,
                                d_h.as<float>(), d_parts.as<float>(), nullptr);
    std::vector<float> parts(rows * hidden);
    d_parts.download(parts.data(), parts.size() * 4);
    return parts;
}

// y[t] += Σ_e w[e][t]·parts[e][t] in increasing e, skipping zero weights: the MoE layer's combine
// (moe.cu's kernel is tested with the layer), here on the host.
void add_weighted_parts(const std::vector<float>& parts, const std::vector<float>& weights,
                        int n_experts, int n_rows, size_t hidden, std::vector<float>* y) {
    for (int e = 0; e < n_experts; ++e) {
        for (int t = 0; t < n_rows; ++t) {
            const float w = weights[static_cast<size_t>(e) * n_rows + t];
            if (w == 0.0F) continue;
            const float* part = &parts[(static_cast<size_t>(e) * n_rows + t) * hidden];
            for (size_t d = 0; d < hidden; ++d) (*y)[t * hidden + d] += w * part[d];
        }
    }
}

TEST_F(CudaAffineGemv, ExpertSwigluMatchesCpuComposition) {
    const int n_experts = 5;
    for (const int bits : kBits) {
        for (const int group_size : {64, 32, 128}) {
            const TestExperts ex =
                make_experts(n_experts, 2560, 640, bits, group_size, 1000 + bits * 10 + group_size);
            for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
                const size_t hidden = 2560;
                const auto x = random_vector(n_rows * hidden, 77 + n_rows);
                const auto weights = routing_weights(n_experts, n_rows, 5 + n_rows + bits);
                const auto y0 = random_vector(n_rows * hidden, 99);
                std::vector<float> expected = y0;
                std::vector<double> scale(expected.size(), 0.0);
                cpu_experts(ex, weights, n_experts, x, n_rows, &expected, &scale, &pool_);

                DeviceBuffer d_x(x.size() * 4);
                d_x.upload(x.data(), x.size() * 4);
                std::vector<float> got = y0;
                add_weighted_parts(expert_parts(ex, n_experts, d_x.as<float>(), n_rows), weights,
                                   n_experts, n_rows, hidden, &got);
                double worst = 0.0;
                for (size_t i = 0; i < got.size(); ++i) {
                    const double diff = std::fabs(static_cast<double>(got[i]) - expected[i]);
                    const double bound = kTolerance * scale[i] + 1e-6 * (1.0 + std::fabs(y0[i]));
                    ASSERT_LE(diff, bound)
                        << "bits=" << bits << " group=" << group_size << " n_rows=" << n_rows
                        << " i=" << i << " gpu=" << got[i] << " cpu=" << expected[i];
                    worst = std::max(worst, diff);
                }
                if (n_rows == kMaxGemvRows) {
                    std::printf("experts bits=%d group=%d: max |gpu-cpu| %.3g\n", bits, group_size,
                                worst);
                }
            }
        }
    }
}

// Whether two runs of affine_gemv over kMaxGemvRows rows of x give the same bits.
bool dense_runs_repeat(const TestMatrix& m, uint64_t seed) {
    const auto rows = static_cast<size_t>(m.rows);
    const auto cols = static_cast<size_t>(m.cols);
    const auto x = random_vector(cols * kMaxGemvRows, seed);
    DeviceBuffer d_x(x.size() * 4), d_y(rows * kMaxGemvRows * 4);
    d_x.upload(x.data(), x.size() * 4);
    std::vector<float> first(rows * kMaxGemvRows), second(rows * kMaxGemvRows);
    for (std::vector<float>* out : {&first, &second}) {
        d_y.fill(0xFF);
        affine_gemv(m.device(), d_x.as<float>(), cols, kMaxGemvRows, d_y.as<float>(), rows,
                    nullptr);
        d_y.download(out->data(), out->size() * 4);
    }
    return std::memcmp(first.data(), second.data(), first.size() * 4) == 0;
}

// Matrices too short to give every multiprocessor a block (the hyper-connection projections, the
// Gated DeltaNet a/b rows) are cut over a cluster's blocks on Hopper: still the CPU's results, and
// the same bits run to run (the cluster adds its slices in rank order).
TEST_F(CudaAffineGemv, ShortMatricesCutOverAClusterMatchTheCpu) {
    if (bulk_gemv_column_slices(4, 64, 320, 10240, 1) == 0) {
        GTEST_SKIP() << "the bulk kernels need sm_90";
    }
    EXPECT_GT(bulk_gemv_column_slices(4, 64, 320, 10240, 1), 1);
    EXPECT_GT(bulk_gemv_column_slices(4, 64, 4, 10240, 1), 1);
    EXPECT_EQ(bulk_gemv_column_slices(4, 64, 10240, 2560, 1), 1);  // tall: enough row blocks
    const int64_t shapes[][2] = {{320, 10240}, {4, 10240}, {48, 2560}, {10240, 320}};
    for (const auto& shape : shapes) {
        for (const int bits : kBits) {
            const TestMatrix m =
                make_matrix(shape[0], shape[1], bits, 64, static_cast<uint64_t>(bits) * 5 + 1);
            const std::string what =
                "bits=" + std::to_string(bits) + " shape=[" + std::to_string(shape[0]) + "," +
                std::to_string(shape[1]) + "] slices=" +
                std::to_string(bulk_gemv_column_slices(bits, 64, shape[0], shape[1], 1));
            check_dense(m, static_cast<size_t>(shape[1]), static_cast<size_t>(shape[0]), bits + 5,
                        &pool_, what);
            if (HasFailure()) return;
        }
    }
    EXPECT_TRUE(dense_runs_repeat(make_matrix(320, 10240, 4, 64, 17), 5));
}

// The hyper-connection's up projection takes silu(x / C) as it reads x (bulk_gemv_dense's
// x_silu_scale): the CPU product of the activated x, on the Flash up shape and an odd one.
TEST_F(CudaAffineGemv, BulkDenseTakesAScaledSiluInput) {
    if (!bulk_gemv_takes(4, 64, 10240, 320, 1)) GTEST_SKIP() << "the bulk kernels need sm_90";
    const float scale = 0.25F;
    const int64_t shapes[][2] = {{10240, 320}, {77, 640}};
    for (const auto& shape : shapes) {
        const TestMatrix m = make_matrix(shape[0], shape[1], 4, 64, 23);
        const auto cols = static_cast<size_t>(shape[1]);
        const auto rows = static_cast<size_t>(shape[0]);
        const auto x = random_vector(cols * kMaxGemvRows, 29);
        std::vector<float> activated(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            const float v = x[i] * scale;
            activated[i] = v / (1.0F + std::exp(-v));
        }
        std::vector<float> expected(rows * kMaxGemvRows);
        matmul(m.host(), activated.data(), cols, kMaxGemvRows, expected.data(), rows, &pool_);
        const std::vector<double> magnitude = magnitudes(m, activated, cols, kMaxGemvRows, &pool_);
        DeviceBuffer d_x(x.size() * 4), d_y(expected.size() * 4);
        d_x.upload(x.data(), x.size() * 4);
        std::vector<float> got(expected.size());
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            d_y.fill(0xFF);
            bulk_gemv_dense(m.device(), d_x.as<float>(), cols, n_rows, d_y.as<float>(), rows,
                            nullptr, scale);
            d_y.download(got.data(), got.size() * 4);
            for (size_t i = 0; i < rows * static_cast<size_t>(n_rows); ++i) {
                ASSERT_LE(std::fabs(static_cast<double>(got[i]) - expected[i]),
                          kTolerance * magnitude[i] + 1e-6)
                    << "shape [" << shape[0] << "," << shape[1] << "] n_rows=" << n_rows
                    << " i=" << i;
            }
        }
    }
}

TEST_F(CudaAffineGemv, ResultsAreBitwiseReproducible) {
    for (const int bits : kBits) {
        EXPECT_TRUE(dense_runs_repeat(make_matrix(2560, 6144, bits, 64, 42 + bits), 3))
            << "bits=" << bits;
        const TestExperts ex = make_experts(10, 2560, 640, bits, 64, 9 + bits);
        const auto xe = random_vector(size_t{4} * 2560, 4);
        DeviceBuffer d_xe(xe.size() * 4);
        d_xe.upload(xe.data(), xe.size() * 4);
        const std::vector<float> first = expert_parts(ex, 10, d_xe.as<float>(), 4);
        const std::vector<float> second = expert_parts(ex, 10, d_xe.as<float>(), 4);
        EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0)
            << "experts bits=" << bits;
    }
}

// The bulk-copy kernels (affine_gemv_bulk.h) keep every sum of the tensor-core kernels in the same
// order, so their outputs are the same bits: checked on the Flash expert shape and on shapes whose
// column ranges split into uneven halves. (Dense matrices may take other column ranges there, so
// they are checked against the CPU like every GEMV.)
TEST_F(CudaAffineGemv, BulkKernelsGiveTheTensorCoreKernelsBits) {
    struct Case {
        int64_t hidden, inter;
        int bits, group;
    };
    // Column ranges of 10/5 groups (Flash), 6 groups (even halves) and 5 groups (3 + 2).
    const Case cases[] = {{2560, 640, 4, 64},  {2560, 640, 2, 64},  {2560, 640, 8, 64},
                          {1536, 384, 4, 128}, {1536, 384, 2, 128}, {1280, 192, 4, 64}};
    int checked = 0;
    for (const Case& k : cases) {
        const int n_experts = 3;
        const TestExperts ex =
            make_experts(n_experts, k.hidden, k.inter, k.bits, k.group, 500 + k.bits + k.group);
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            if (!bulk_experts_take(ex.shape, n_rows) ||
                !mma_gemv_takes(k.bits, k.group, k.hidden, n_rows) ||
                !mma_gemv_takes(k.bits, k.group, k.inter, n_rows)) {
                continue;
            }
            const auto x = random_vector(static_cast<size_t>(n_rows * k.hidden), 31 + n_rows);
            const auto h_floats = static_cast<size_t>(int64_t{n_experts} * n_rows * k.inter);
            const auto part_floats = static_cast<size_t>(int64_t{n_experts} * n_rows * k.hidden);
            DeviceBuffer d_x(x.size() * 4), d_h(h_floats * 4), d_part(part_floats * 4);
            d_x.upload(x.data(), x.size() * 4);
            std::vector<float> h_mma(h_floats), h_bulk(h_floats), part_mma(part_floats),
                part_bulk(part_floats);
            const auto* table = ex.d_table.as<ExpertAddress>();
            for (const bool bulk : {false, true}) {
                d_h.fill(0xFF);
                d_part.fill(0xFF);
                if (bulk) {
                    bulk_experts_gate_up(ex.shape, table, n_experts, d_x.as<float>(), n_rows,
                                         d_h.as<float>(), nullptr);
                    bulk_experts_down(ex.shape, table, n_experts, d_h.as<float>(), n_rows,
                                      d_part.as<float>(), nullptr);
                } else {
                    mma_experts_gate_up(ex.shape, table, n_experts, d_x.as<float>(), n_rows,
                                        d_h.as<float>(), nullptr);
                    mma_experts_down(ex.shape, table, n_experts, d_h.as<float>(), n_rows,
                                     d_part.as<float>(), nullptr);
                }
                d_h.download((bulk ? h_bulk : h_mma).data(), h_floats * 4);
                d_part.download((bulk ? part_bulk : part_mma).data(), part_floats * 4);
            }
            const std::string what =
                "bits=" + std::to_string(k.bits) + " group=" + std::to_string(k.group) +
                " hidden=" + std::to_string(k.hidden) + " n_rows=" + std::to_string(n_rows);
            ASSERT_EQ(std::memcmp(h_mma.data(), h_bulk.data(), h_floats * 4), 0) << "h " << what;
            ASSERT_EQ(std::memcmp(part_mma.data(), part_bulk.data(), part_floats * 4), 0)
                << "parts " << what;
            ++checked;
        }
    }
    if (checked == 0) GTEST_SKIP() << "the bulk kernels need sm_90";
}

// A table filled by an earlier kernel (routing on the device) says how many of its entries are in
// use through a device count: those entries get the bits of a call over exactly them, and the
// scratch and parts of the entries past the count stay untouched. Every kernel family: the
// dispatching call (3 bits: the FMA kernels), and the tensor-core and bulk kernels called directly.
TEST_F(CudaAffineGemv, ExpertPartsStopAtTheDeviceCount) {
    const int capacity = 5;
    const int in_use = 3;
    DeviceBuffer d_count(sizeof(int));
    d_count.upload(&in_use, sizeof(int));
    using Launch = void (*)(const ExpertShape&, const ExpertAddress*, int, const float*, int,
                            float*, float*, const int*);
    const Launch dispatch = [](const ExpertShape& shape, const ExpertAddress* table, int n,
                               const float* x, int rows, float* h, float* parts, const int* count) {
        affine_experts_swiglu_parts(shape, table, n, x, rows, h, parts, nullptr, count);
    };
    const Launch mma = [](const ExpertShape& shape, const ExpertAddress* table, int n,
                          const float* x, int rows, float* h, float* parts, const int* count) {
        mma_experts_gate_up(shape, table, n, x, rows, h, nullptr, count);
        mma_experts_down(shape, table, n, h, rows, parts, nullptr, count);
    };
    const Launch bulk = [](const ExpertShape& shape, const ExpertAddress* table, int n,
                           const float* x, int rows, float* h, float* parts, const int* count) {
        bulk_experts_gate_up(shape, table, n, x, rows, h, nullptr, count);
        bulk_experts_down(shape, table, n, h, rows, parts, nullptr, count);
    };
    struct Case {
        const char* kernels;
        Launch launch;
        int bits;
    };
    for (const Case& k : {Case{"dispatch", dispatch, 3}, Case{"dispatch", dispatch, 4},
                          Case{"mma", mma, 4}, Case{"bulk", bulk, 4}}) {
        const TestExperts ex = make_experts(capacity, 2560, 640, k.bits, 64, 700 + k.bits);
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            const bool mma_takes =
                mma_gemv_takes(k.bits, 64, 2560, n_rows) && mma_gemv_takes(k.bits, 64, 640, n_rows);
            if ((k.launch == mma && !mma_takes) ||
                (k.launch == bulk && (!mma_takes || !bulk_experts_take(ex.shape, n_rows)))) {
                continue;
            }
            const auto x = random_vector(static_cast<size_t>(n_rows) * 2560, 17 + n_rows);
            const size_t h_floats = size_t{capacity} * n_rows * 640;
            const size_t part_floats = size_t{capacity} * n_rows * 2560;
            DeviceBuffer d_x(x.size() * 4), d_h(h_floats * 4), d_part(part_floats * 4);
            d_x.upload(x.data(), x.size() * 4);
            std::vector<float> h_exact(h_floats), part_exact(part_floats), h_counted(h_floats),
                part_counted(part_floats);
            const auto* table = ex.d_table.as<ExpertAddress>();
            for (const bool counted : {false, true}) {
                d_h.fill(0xFF);
                d_part.fill(0xFF);
                k.launch(ex.shape, table, counted ? capacity : in_use, d_x.as<float>(), n_rows,
                         d_h.as<float>(), d_part.as<float>(),
                         counted ? d_count.as<int>() : nullptr);
                d_h.download((counted ? h_counted : h_exact).data(), h_floats * 4);
                d_part.download((counted ? part_counted : part_exact).data(), part_floats * 4);
            }
            const std::string what = std::string(k.kernels) + " bits=" + std::to_string(k.bits) +
                                     " n_rows=" + std::to_string(n_rows);
            // Equal bits everywhere: below the count the same sums, past it the 0xFF fill.
            EXPECT_EQ(std::memcmp(h_exact.data(), h_counted.data(), h_floats * 4), 0) << what;
            EXPECT_EQ(std::memcmp(part_exact.data(), part_counted.data(), part_floats * 4), 0)
                << what;
            EXPECT_FALSE(std::isnan(part_counted[0])) << what;
            EXPECT_TRUE(std::isnan(part_counted[part_floats - 1])) << what;
        }
    }
}

// The one-launch expert kernel (expert_layer.h, Hopper, 4-bit groups of 64): the CPU's
// composition on the Flash shape and a smaller one, for tables of 1 to 11 experts, and each row's
// bits the same whatever the number of rows in the call (drafts must not change a token's text).
TEST_F(CudaAffineGemv, OneLaunchExpertsMatchTheCpuAndKeepEachRowsBits) {
    struct Case {
        int64_t hidden, inter;
        int n_experts;
    };
    int checked = 0;
    for (const Case& k : {Case{2560, 640, 11}, Case{2560, 640, 1}, Case{512, 256, 7}}) {
        const TestExperts ex = make_experts(k.n_experts, k.hidden, k.inter, 4, 64,
                                            300 + k.n_experts + static_cast<uint64_t>(k.inter));
        if (!layer_experts_take(ex.shape, 1)) continue;
        ++checked;
        const auto hidden = static_cast<size_t>(k.hidden);
        const auto inter = static_cast<size_t>(k.inter);
        const auto x = random_vector(kMaxGemvRows * hidden, 41 + k.n_experts);
        DeviceBuffer d_x(x.size() * 4), d_x1(hidden * 4);
        d_x.upload(x.data(), x.size() * 4);
        // Each row alone: the reference bits.
        std::vector<std::vector<float>> alone(kMaxGemvRows);
        const size_t h1 = k.n_experts * inter, p1 = k.n_experts * hidden;
        DeviceBuffer d_h(h1 * kMaxGemvRows * 4), d_part(p1 * kMaxGemvRows * 4);
        for (int t = 0; t < kMaxGemvRows; ++t) {
            d_x1.upload(x.data() + t * hidden, hidden * 4);
            d_part.fill(0xFF);
            layer_experts_parts(ex.shape, ex.d_table.as<ExpertAddress>(), k.n_experts,
                                d_x1.as<float>(), 1, d_h.as<float>(), d_part.as<float>(), nullptr);
            alone[t].resize(p1);
            d_part.download(alone[t].data(), p1 * 4);
        }
        for (int n_rows = 1; n_rows <= kMaxGemvRows; ++n_rows) {
            d_part.fill(0xFF);
            affine_experts_swiglu_parts(ex.shape, ex.d_table.as<ExpertAddress>(), k.n_experts,
                                        d_x.as<float>(), n_rows, d_h.as<float>(),
                                        d_part.as<float>(), nullptr);
            std::vector<float> parts(p1 * n_rows);
            d_part.download(parts.data(), parts.size() * 4);
            for (int e = 0; e < k.n_experts; ++e) {
                for (int t = 0; t < n_rows; ++t) {
                    EXPECT_EQ(std::memcmp(&parts[(e * n_rows + t) * hidden], &alone[t][e * hidden],
                                          hidden * 4),
                              0)
                        << "hidden=" << k.hidden << " experts=" << k.n_experts
                        << " n_rows=" << n_rows << " expert " << e << " row " << t;
                }
            }
        }
        // The weighted sum of the four rows' parts against the CPU.
        const auto weights = routing_weights(k.n_experts, kMaxGemvRows, 3 + k.n_experts);
        std::vector<float> expected(kMaxGemvRows * hidden, 0.0F);
        std::vector<double> scale(expected.size(), 0.0);
        cpu_experts(ex, weights, k.n_experts, x, kMaxGemvRows, &expected, &scale, &pool_);
        std::vector<float> got(expected.size(), 0.0F);
        add_weighted_parts(expert_parts(ex, k.n_experts, d_x.as<float>(), kMaxGemvRows), weights,
                           k.n_experts, kMaxGemvRows, hidden, &got);
        for (size_t i = 0; i < got.size(); ++i) {
            const double diff = std::fabs(static_cast<double>(got[i]) - expected[i]);
            ASSERT_LE(diff, kTolerance * scale[i] + 1e-6)
                << "hidden=" << k.hidden << " i=" << i << " gpu=" << got[i]
                << " cpu=" << expected[i];
        }
    }
    if (checked == 0) GTEST_SKIP() << "the one-launch expert kernel needs sm_90";
}

TEST_F(CudaAffineGemv, RejectsBadArguments) {
    const TestMatrix m = make_matrix(8, 64, 4, 64, 1);
    DeviceBuffer d_x(size_t{4} * 64 * 4), d_y(size_t{4} * 8 * 4);
    EXPECT_THROW(affine_gemv(m.device(), d_x.as<float>(), 64, 5, d_y.as<float>(), 8, nullptr),
                 Error);
    EXPECT_THROW(affine_gemv(m.device(), d_x.as<float>() + 1, 64, 1, d_y.as<float>(), 8, nullptr),
                 Error);
    DeviceAffineMatrix five_bit = m.device();
    five_bit.bits = 5;
    EXPECT_THROW(affine_gemv(five_bit, d_x.as<float>(), 64, 1, d_y.as<float>(), 8, nullptr), Error);
}

// Without CUDA (or without a device) every entry point reports why instead of crashing.
TEST(CudaAffineGemvUnavailable, CallsSayBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    EXPECT_FALSE(have_device());
    try {
        affine_gemv(DeviceAffineMatrix{}, nullptr, 0, 1, nullptr, 0, nullptr);
        FAIL() << "affine_gemv did not throw";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
    EXPECT_THROW(affine_experts_swiglu_parts(ExpertShape{}, nullptr, 1, nullptr, 1, nullptr,
                                             nullptr, nullptr),
                 Error);
    EXPECT_THROW(DeviceBuffer(16), Error);
}

}  // namespace
}  // namespace cherenkov::engine::cuda
