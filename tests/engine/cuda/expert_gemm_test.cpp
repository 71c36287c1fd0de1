// The grouped expert GEMM (engine/cuda/expert_gemm.h) against the CPU matmul: every (bits,
// group) it takes, experts with 1, 3, 8, 17 and 40 (row, slot)s (partial token tiles, one and
// several tiles), the Flash shape and small odd multiples of the group; bitwise reproducibility,
// also when the experts are split over several launches, and with tiles grouped on the device;
// the dense form on odd token counts.
// Skips without a device; in a build without CUDA it checks that calls say so.
#include "engine/cuda/expert_gemm.h"

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
#include "engine/cuda/expert_group.h"
#include "engine/cuda/expert_grouping.h"

namespace cherenkov::engine::cuda {
namespace {

using affine_test::kTolerance;
using affine_test::magnitudes;
using affine_test::make_matrix;
using affine_test::random_vector;
using affine_test::splitmix;
using affine_test::TestMatrix;

// (bits, group) pairs the grouped kernels take.
constexpr int kShapes[][2] = {{2, 64}, {2, 128}, {4, 64}, {4, 128}, {8, 64}};
// (row, slot)s per expert: a partial tile, a full n-block, two tiles, three tiles.
constexpr int32_t kCounts[] = {1, 3, 8, 17, 40};
constexpr int kTop = 3;  // 69 pairs = 23 rows × 3 slots

class CudaExpertGemm : public DeviceTest {
protected:
    ThreadPool pool_{0};
};

// Experts on the host and the device, with their address table.
struct TestExperts {
    ExpertShape shape;
    std::vector<TestMatrix> gate, up, down;
    DeviceBuffer d_table;
};

TestExperts make_experts(int n_experts, const ExpertShape& shape, uint64_t seed) {
    TestExperts ex;
    ex.shape = shape;
    std::vector<ExpertAddress> table;
    for (int e = 0; e < n_experts; ++e) {
        const auto s = seed + 3 * static_cast<uint64_t>(e);
        ex.gate.push_back(
            make_matrix(shape.intermediate, shape.hidden, shape.bits, shape.group_size, s));
        ex.up.push_back(
            make_matrix(shape.intermediate, shape.hidden, shape.bits, shape.group_size, s + 1));
        ex.down.push_back(
            make_matrix(shape.hidden, shape.intermediate, shape.bits, shape.group_size, s + 2));
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

// A routing of n_pairs (row, slot) indices over the experts with the given counts, scattered,
// and its counting sort as moe.cu's prepare() makes it: slots grouped by expert, increasing
// within each; first[e] where expert e's run starts.
struct Routing {
    std::vector<int32_t> expert_of;  // [T·k]
    std::vector<int32_t> slots;      // [T·k]
    std::vector<int32_t> first;      // [E + 1]
};

Routing make_routing(const std::vector<int32_t>& counts, uint64_t seed) {
    Routing r;
    for (size_t e = 0; e < counts.size(); ++e) {
        r.expert_of.insert(r.expert_of.end(), static_cast<size_t>(counts[e]),
                           static_cast<int32_t>(e));
    }
    uint64_t state = seed;
    for (size_t i = r.expert_of.size(); i > 1; --i) {
        std::swap(r.expert_of[i - 1], r.expert_of[splitmix(state) % i]);
    }
    r.first.assign(counts.size() + 1, 0);
    for (size_t e = 0; e < counts.size(); ++e) r.first[e + 1] = r.first[e] + counts[e];
    std::vector<int32_t> fill(r.first.begin(), r.first.end() - 1);
    r.slots.resize(r.expert_of.size());
    for (size_t i = 0; i < r.expert_of.size(); ++i) {
        r.slots[static_cast<size_t>(fill[static_cast<size_t>(r.expert_of[i])]++)] =
            static_cast<int32_t>(i);
    }
    return r;
}

// The device side of one call: mix [T, H], slots, and h [T·k, I] / parts [T·k, H] poisoned.
struct DeviceCall {
    DeviceBuffer mix, slots, h, parts, tiles;
    int n_tiles = 0;
};

// Launches gate/up then down with the experts split into launches of `per_launch` experts
// (ExpertGroup's tiles, as moe.cu builds them).
void run(const TestExperts& ex, const Routing& r, DeviceCall* call, int per_launch) {
    const auto n_experts = static_cast<int>(r.first.size() - 1);
    std::vector<ExpertTokenTile> storage(static_cast<size_t>(
        max_expert_token_tiles(static_cast<int64_t>(r.slots.size()), n_experts)));
    ExpertGroup group(storage, per_launch);
    call->tiles = DeviceBuffer(storage.size() * sizeof(ExpertTokenTile));
    auto flush = [&] {
        const int32_t first = group.first_tile();
        const int n = group.n_tiles() - first;
        call->tiles.upload(group.tiles().data() + first,
                           static_cast<size_t>(n) * sizeof(ExpertTokenTile),
                           static_cast<size_t>(first) * sizeof(ExpertTokenTile));
        const ExpertGemmTiles t{
            ex.shape, ex.d_table.as<ExpertAddress>(), call->tiles.as<ExpertTokenTile>() + first,
            n,        call->slots.as<int32_t>(),      static_cast<int64_t>(r.slots.size())};
        expert_gemm_gate_up(t, call->mix.as<float>(), kTop, call->h.as<float>(), nullptr);
        expert_gemm_down(t, call->h.as<float>(), call->parts.as<float>(), nullptr);
        group.launched();
    };
    for (int e = 0; e < n_experts; ++e) {
        const int32_t entry =
            group.add(ex.shape.bits, r.first[static_cast<size_t>(e)],
                      r.first[static_cast<size_t>(e) + 1] - r.first[static_cast<size_t>(e)]);
        EXPECT_EQ(entry, e);  // table entry e is expert e
        if (group.full()) flush();
    }
    if (!group.empty()) flush();
    device_synchronize();
}

DeviceCall upload_call(const ExpertShape& shape, const Routing& r, const std::vector<float>& mix) {
    DeviceCall call;
    const size_t tk = r.slots.size();
    call.mix = DeviceBuffer(mix.size() * 4);
    call.mix.upload(mix.data(), mix.size() * 4);
    call.slots = DeviceBuffer(tk * 4);
    call.slots.upload(r.slots.data(), tk * 4);
    call.h = DeviceBuffer(tk * static_cast<size_t>(shape.intermediate) * 4);
    call.parts = DeviceBuffer(tk * static_cast<size_t>(shape.hidden) * 4);
    call.h.fill(0xFF);  // NaN: an unwritten output fails
    call.parts.fill(0xFF);
    return call;
}

// Checks both launches of one call against the CPU: h against silu(gate·x)·(up·x), then parts
// against down·h_gpu (so each launch is checked on its own inputs).
void check_call(const TestExperts& ex, const Routing& r, const std::vector<float>& mix,
                const DeviceCall& call, ThreadPool* pool, const std::string& what) {
    const auto hidden = static_cast<size_t>(ex.shape.hidden);
    const auto inter = static_cast<size_t>(ex.shape.intermediate);
    const size_t tk = r.slots.size();
    std::vector<float> h(tk * inter), parts(tk * hidden);
    call.h.download(h.data(), h.size() * 4);
    call.parts.download(parts.data(), parts.size() * 4);
    double worst_h = 0.0, worst_parts = 0.0;
    for (size_t e = 0; e + 1 < r.first.size(); ++e) {
        const auto n = static_cast<size_t>(r.first[e + 1] - r.first[e]);
        // Gather the expert's x rows and GPU h rows in list order.
        std::vector<float> x(n * hidden), hg(n * inter);
        for (size_t j = 0; j < n; ++j) {
            const auto i = static_cast<size_t>(r.slots[static_cast<size_t>(r.first[e]) + j]);
            std::copy_n(mix.begin() + static_cast<long>(i / kTop * hidden), hidden,
                        x.begin() + static_cast<long>(j * hidden));
            std::copy_n(h.begin() + static_cast<long>(i * inter), inter,
                        hg.begin() + static_cast<long>(j * inter));
        }
        std::vector<float> g(n * inter), u(n * inter), y(n * hidden);
        matmul(ex.gate[e].host(), x.data(), hidden, static_cast<int64_t>(n), g.data(), inter, pool);
        matmul(ex.up[e].host(), x.data(), hidden, static_cast<int64_t>(n), u.data(), inter, pool);
        const auto mag_g = magnitudes(ex.gate[e], x, hidden, static_cast<int64_t>(n), pool);
        const auto mag_u = magnitudes(ex.up[e], x, hidden, static_cast<int64_t>(n), pool);
        for (size_t j = 0; j < n; ++j) {
            for (size_t row = 0; row < inter; ++row) {
                const size_t at = j * inter + row;
                const float silu = g[at] / (1.0F + std::exp(-g[at]));
                const double expected = static_cast<double>(silu) * u[at];
                // silu' ≤ 1.1: the gate's error enters times 1.1·|u|, the up's times |silu(g)|;
                // silu and the product round once more each.
                const double bound = kTolerance * (1.1 * mag_g[at] * std::fabs(u[at]) +
                                                   std::fabs(silu) * mag_u[at]) +
                                     1e-6 * (std::fabs(expected) + 1.0);
                const double diff = std::fabs(hg[at] - expected);
                ASSERT_LE(diff, bound) << what << " h: expert " << e << " token " << j << " row "
                                       << row << " gpu=" << hg[at] << " cpu=" << expected;
                worst_h = std::max(worst_h, diff);
            }
        }
        matmul(ex.down[e].host(), hg.data(), inter, static_cast<int64_t>(n), y.data(), hidden,
               pool);
        const auto mag_d = magnitudes(ex.down[e], hg, inter, static_cast<int64_t>(n), pool);
        for (size_t j = 0; j < n; ++j) {
            const auto i = static_cast<size_t>(r.slots[static_cast<size_t>(r.first[e]) + j]);
            for (size_t row = 0; row < hidden; ++row) {
                const double diff =
                    std::fabs(static_cast<double>(parts[i * hidden + row]) - y[j * hidden + row]);
                const double bound = kTolerance * mag_d[j * hidden + row] + 1e-6;
                ASSERT_LE(diff, bound)
                    << what << " parts: expert " << e << " token " << j << " row " << row
                    << " gpu=" << parts[i * hidden + row] << " cpu=" << y[j * hidden + row];
                worst_parts = std::max(worst_parts, diff);
            }
        }
    }
    std::printf("%s: max |gpu-cpu| h %.3g, parts %.3g\n", what.c_str(), worst_h, worst_parts);
}

void check_shape(const ExpertShape& shape, ThreadPool* pool, uint64_t seed) {
    const std::vector<int32_t> counts(std::begin(kCounts), std::end(kCounts));
    const Routing r = make_routing(counts, seed);
    const TestExperts ex = make_experts(static_cast<int>(counts.size()), shape, seed * 7);
    const int64_t n_rows = static_cast<int64_t>(r.slots.size()) / kTop;
    const auto mix = random_vector(static_cast<size_t>(n_rows * shape.hidden), seed + 1);
    DeviceCall call = upload_call(shape, r, mix);
    run(ex, r, &call, 64);
    check_call(ex, r, mix, call, pool,
               "bits=" + std::to_string(shape.bits) + " group=" + std::to_string(shape.group_size) +
                   " hidden=" + std::to_string(shape.hidden) +
                   " inter=" + std::to_string(shape.intermediate));
}

TEST_F(CudaExpertGemm, MatchesCpuOnOddMultiplesOfTheGroup) {
    for (const auto& [bits, group] : kShapes) {
        // Down rows 3·G: a row block with idle warps; gate/up 5·G columns: a partial chunk.
        const int64_t g = group;
        check_shape(ExpertShape{3 * g, 5 * g, bits, group}, &pool_,
                    static_cast<uint64_t>(bits) * 10 + static_cast<uint64_t>(group));
        if (HasFatalFailure()) return;
        // One group of columns each way (the tiny fixtures' 64 × 64).
        check_shape(ExpertShape{group, group, bits, group}, &pool_,
                    static_cast<uint64_t>(bits) * 10 + static_cast<uint64_t>(group) + 1);
        if (HasFatalFailure()) return;
    }
}

TEST_F(CudaExpertGemm, MatchesCpuOnTheFlashShape) {
    for (const auto& [bits, group] : kShapes) {
        check_shape(ExpertShape{2560, 640, bits, group}, &pool_,
                    static_cast<uint64_t>(bits) * 100 + static_cast<uint64_t>(group));
        if (HasFatalFailure()) return;
    }
}

// Same bits run to run, and whichever experts share a launch (one launch, or one per expert).
TEST_F(CudaExpertGemm, ResultsAreBitwiseReproducibleAndIndependentOfGrouping) {
    const std::vector<int32_t> counts(std::begin(kCounts), std::end(kCounts));
    for (const auto& [bits, group] : kShapes) {
        const ExpertShape shape{2560, 640, bits, group};
        const Routing r = make_routing(counts, 5);
        const TestExperts ex = make_experts(static_cast<int>(counts.size()), shape, 11);
        const auto mix = random_vector(r.slots.size() / kTop * 2560, 3);
        std::vector<std::vector<float>> results;
        for (const int per_launch : {64, 64, 1, 2}) {
            DeviceCall call = upload_call(shape, r, mix);
            run(ex, r, &call, per_launch);
            std::vector<float> parts(r.slots.size() * 2560);
            call.parts.download(parts.data(), parts.size() * 4);
            results.push_back(std::move(parts));
        }
        for (size_t k = 1; k < results.size(); ++k) {
            EXPECT_EQ(std::memcmp(results[0].data(), results[k].data(), results[0].size() * 4), 0)
                << "bits=" << bits << " group=" << group << " run " << k;
        }
    }
}

// Tiles built on the device (group_by_expert, moe.cu's prefill path for a layer the pool holds
// whole): the launches cover max_expert_token_tiles and read how many are in use from the device.
// The tiles past that count hold a wrong expert for the first position, so reading one would
// change the outputs. Same bits as the host's tiles.
TEST_F(CudaExpertGemm, TilesGroupedOnTheDeviceGiveTheHostTilesBits) {
    const std::vector<int32_t> counts(std::begin(kCounts), std::end(kCounts));
    const auto n_experts = static_cast<int>(counts.size());
    const ExpertShape shape{2560, 640, 4, 64};
    const Routing r = make_routing(counts, 9);
    const TestExperts ex = make_experts(n_experts, shape, 13);
    const auto tk = static_cast<int64_t>(r.slots.size());
    const auto mix = random_vector(static_cast<size_t>(tk / kTop * 2560), 4);
    DeviceCall host_call = upload_call(shape, r, mix);
    run(ex, r, &host_call, 64);

    DeviceCall call = upload_call(shape, r, mix);
    const int64_t max_tiles = max_expert_token_tiles(tk, std::min<int64_t>(n_experts, tk));
    const std::vector<ExpertTokenTile> poison(static_cast<size_t>(max_tiles),
                                              ExpertTokenTile{1, 0, 1});
    const auto n_tk = static_cast<size_t>(tk);
    const std::vector<float> weights(n_tk, 1.0F);
    DeviceBuffer experts(n_tk * 4), d_weights(n_tk * 4), part_rows(n_tk * 4), part_weights(n_tk * 4),
        tiles(poison.size() * sizeof(ExpertTokenTile)), n_tiles(4);
    experts.upload(r.expert_of.data(), n_tk * 4);
    d_weights.upload(weights.data(), n_tk * 4);
    tiles.upload(poison.data(), poison.size() * sizeof(ExpertTokenTile));
    const DeviceExpertGroups groups{call.slots.as<int32_t>(), tiles.as<ExpertTokenTile>(),
                                    n_tiles.as<int32_t>(),    part_rows.as<int32_t>(),
                                    part_weights.as<float>(), nullptr};
    // make_routing's rows may repeat an expert, which only the part rows (unused here) care about.
    group_by_expert(experts.as<int32_t>(), d_weights.as<float>(), tk / kTop, kTop, n_experts,
                    groups, nullptr);
    const ExpertGemmTiles t{shape,
                            ex.d_table.as<ExpertAddress>(),
                            tiles.as<ExpertTokenTile>(),
                            static_cast<int>(max_tiles),
                            call.slots.as<int32_t>(),
                            tk,
                            n_tiles.as<int32_t>()};
    expert_gemm_gate_up(t, call.mix.as<float>(), kTop, call.h.as<float>(), nullptr);
    expert_gemm_down(t, call.h.as<float>(), call.parts.as<float>(), nullptr);
    device_synchronize();
    int32_t used = 0;
    n_tiles.download(&used, 4);
    EXPECT_LT(used, max_tiles);  // some tiles past the count, so the poison is there to be read
    std::vector<float> expected(n_tk * 2560), parts(n_tk * 2560);
    host_call.parts.download(expected.data(), expected.size() * 4);
    call.parts.download(parts.data(), parts.size() * 4);
    EXPECT_EQ(std::memcmp(expected.data(), parts.data(), parts.size() * 4), 0);
}

TEST_F(CudaExpertGemm, TakesOnlyItsShapesAndRejectsBadArguments) {
    EXPECT_TRUE(expert_gemm_takes(ExpertShape{2560, 640, 4, 64}));
    EXPECT_TRUE(expert_gemm_takes(ExpertShape{2560, 640, 8, 64}));
    EXPECT_FALSE(expert_gemm_takes(ExpertShape{2560, 640, 3, 64}));
    EXPECT_FALSE(expert_gemm_takes(ExpertShape{2560, 640, 4, 32}));
    EXPECT_FALSE(expert_gemm_takes(ExpertShape{2560, 640, 8, 128}));
    DeviceBuffer x(size_t{64} * 64 * 4), y(size_t{64} * 64 * 4);
    const ExpertTokenTile* tiles = nullptr;
    const ExpertGemmTiles three_bit{ExpertShape{64, 64, 3, 64}, nullptr, tiles, 0, nullptr};
    EXPECT_THROW(expert_gemm_down(three_bit, x.as<float>(), y.as<float>(), nullptr), Error);
    const ExpertGemmTiles q4{ExpertShape{64, 64, 4, 64}, nullptr, tiles, 0, nullptr};
    EXPECT_THROW(expert_gemm_gate_up(q4, x.as<float>() + 1, kTop, y.as<float>(), nullptr), Error);
    EXPECT_THROW(expert_gemm_gate_up(q4, x.as<float>(), 0, y.as<float>(), nullptr), Error);
    // Tiles without the slot list's length (the launch stages x by it), or one top does not divide.
    const ExpertTokenTile one{0, 0, 1};
    DeviceBuffer one_tile(sizeof one), slots(sizeof(int32_t) * 4);
    one_tile.upload(&one, sizeof one);
    const ExpertGemmTiles no_length{ExpertShape{64, 64, 4, 64},
                                    reinterpret_cast<const ExpertAddress*>(x.as<float>()),
                                    one_tile.as<ExpertTokenTile>(),
                                    1,
                                    slots.as<int32_t>(),
                                    0};
    EXPECT_THROW(expert_gemm_down(no_length, x.as<float>(), y.as<float>(), nullptr), Error);
    ExpertGemmTiles odd_length = no_length;
    odd_length.n_slots = 4;
    EXPECT_THROW(expert_gemm_gate_up(odd_length, x.as<float>(), kTop, y.as<float>(), nullptr),
                 Error);
    const ExpertGemmTiles partial_group{ExpertShape{96, 64, 4, 64}, nullptr, tiles, 0, nullptr};
    EXPECT_THROW(expert_gemm_down(partial_group, x.as<float>(), y.as<float>(), nullptr), Error);
    // No tiles: nothing to do.
    expert_gemm_down(q4, x.as<float>(), y.as<float>(), nullptr);
}

// The dense form (what affine_gemm() calls for these shapes): against the CPU matmul on odd
// token counts (a partial last tile, one of a single token), a y stride past the rows, and the
// same bits for a token whatever the number of tokens in the call.
TEST_F(CudaExpertGemm, DenseFormMatchesCpuAndDoesNotDependOnTheTokenCount) {
    const affine_test::TestMatrix m = affine_test::make_matrix(300, 640, 4, 64, 17);
    const DeviceAffineMatrix w = m.device();
    constexpr int64_t kTokens = 37;
    constexpr size_t kYStride = 305;
    const std::vector<float> x = affine_test::random_vector(size_t{kTokens} * 640, 23);
    std::vector<float> expected(size_t{kTokens} * kYStride);
    ThreadPool pool(0);
    matmul(m.host(), x.data(), 640, kTokens, expected.data(), kYStride, &pool);
    const std::vector<double> scale = affine_test::magnitudes(m, x, 640, kTokens, &pool);
    DeviceBuffer d_x(x.size() * 4), d_y(expected.size() * 4);
    d_x.upload(x.data(), x.size() * 4);
    ASSERT_TRUE(affine_gemm_tensor_cores_take(w, d_x.as<float>(), 640));
    EXPECT_FALSE(affine_gemm_tensor_cores_take(w, d_x.as<float>() + 1, 640));  // unaligned x
    EXPECT_FALSE(affine_gemm_tensor_cores_take(w, d_x.as<float>(), 642));      // x_stride % 4
    DeviceAffineMatrix three_bit = w;
    three_bit.bits = 3;
    EXPECT_FALSE(affine_gemm_tensor_cores_take(three_bit, d_x.as<float>(), 640));

    d_y.fill(0xFF);
    affine_gemm_tensor_cores(w, d_x.as<float>(), 640, kTokens, d_y.as<float>(), kYStride, nullptr);
    std::vector<float> all(expected.size());
    d_y.download(all.data(), all.size() * 4);
    for (int64_t t = 0; t < kTokens; ++t) {
        for (size_t r = 0; r < kYStride; ++r) {
            const size_t i = static_cast<size_t>(t) * kYStride + r;
            if (r >= 300) {
                ASSERT_TRUE(std::isnan(all[i])) << "wrote padding t=" << t << " r=" << r;
                continue;
            }
            ASSERT_LE(std::fabs(all[i] - expected[i]),
                      affine_test::kTolerance * scale[static_cast<size_t>(t) * 300 + r] + 1e-6)
                << "t=" << t << " r=" << r;
        }
    }
    for (const int64_t n : {int64_t{1}, int64_t{16}, int64_t{17}}) {
        d_y.fill(0xFF);
        affine_gemm_tensor_cores(w, d_x.as<float>(), 640, n, d_y.as<float>(), kYStride, nullptr);
        std::vector<float> got(static_cast<size_t>(n) * kYStride);
        d_y.download(got.data(), got.size() * 4);
        EXPECT_EQ(std::memcmp(got.data(), all.data(), got.size() * 4), 0) << "n_rows=" << n;
    }
    EXPECT_THROW(
        affine_gemm_tensor_cores(w, d_x.as<float>(), 640, kTokens, d_y.as<float>(), 299, nullptr),
        Error);  // y_stride < rows
}

// Matrices of few rows and many columns (the hyper-connection projections: 4 and a few hundred
// rows of hc·hidden columns) are summed in column splits: against the CPU, and the same bits for
// a token whatever the token count (the split depends on the shape only). A wide matrix (no
// split) alongside.
TEST_F(CudaExpertGemm, NarrowDenseMatricesMatchCpuInColumnSplits) {
    struct Shape {
        int64_t rows, cols;
        int group;
    };
    ThreadPool pool(0);
    for (const Shape shape : {Shape{4, 10240, 64}, Shape{260, 10240, 128}, Shape{24, 2560, 64},
                              Shape{1030, 640, 64}}) {
        const auto m = affine_test::make_matrix(shape.rows, shape.cols, 4, shape.group, 31);
        const DeviceAffineMatrix w = m.device();
        constexpr int64_t kTokens = 45;
        const auto cols = static_cast<size_t>(shape.cols);
        const auto rows = static_cast<size_t>(shape.rows);
        const std::vector<float> x = affine_test::random_vector(size_t{kTokens} * cols, 37);
        std::vector<float> expected(size_t{kTokens} * rows);
        matmul(m.host(), x.data(), cols, kTokens, expected.data(), rows, &pool);
        const std::vector<double> scale = affine_test::magnitudes(m, x, cols, kTokens, &pool);
        DeviceBuffer d_x(x.size() * 4), d_y(expected.size() * 4);
        d_x.upload(x.data(), x.size() * 4);
        ASSERT_TRUE(affine_gemm_tensor_cores_take(w, d_x.as<float>(), cols));
        std::vector<float> all(expected.size());
        for (const int64_t n : {kTokens, int64_t{5}, int64_t{33}}) {
            d_y.fill(0xFF);
            affine_gemm_tensor_cores(w, d_x.as<float>(), cols, n, d_y.as<float>(), rows, nullptr);
            std::vector<float> got(static_cast<size_t>(n) * rows);
            d_y.download(got.data(), got.size() * 4);
            if (n == kTokens) {
                all = got;
                for (size_t i = 0; i < all.size(); ++i) {
                    ASSERT_LE(std::fabs(all[i] - expected[i]),
                              affine_test::kTolerance * scale[i] + 1e-6)
                        << shape.rows << "x" << shape.cols << " at " << i;
                }
            } else {
                EXPECT_EQ(std::memcmp(got.data(), all.data(), got.size() * 4), 0)
                    << shape.rows << "x" << shape.cols << " n_rows=" << n;
            }
        }
    }
}

TEST(CudaExpertGemmUnavailable, CallsSayBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    EXPECT_FALSE(expert_gemm_takes(ExpertShape{2560, 640, 4, 64}));
    try {
        expert_gemm_down(ExpertGemmTiles{}, nullptr, nullptr, nullptr);
        FAIL() << "expert_gemm_down did not throw";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
    EXPECT_THROW(expert_gemm_gate_up(ExpertGemmTiles{}, nullptr, 1, nullptr, nullptr), Error);
    EXPECT_FALSE(affine_gemm_tensor_cores_take(DeviceAffineMatrix{}, nullptr, 0));
    EXPECT_THROW(affine_gemm_tensor_cores(DeviceAffineMatrix{}, nullptr, 0, 1, nullptr, 0, nullptr),
                 Error);
}

}  // namespace
}  // namespace cherenkov::engine::cuda
