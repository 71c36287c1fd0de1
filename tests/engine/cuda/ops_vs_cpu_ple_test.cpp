// The op-vs-CPU harness for per-layer n-gram embeddings (ops_vs_cpu.h): cuda::ple_forward
// (ple.cu) against engine::ple_forward on every reference fixture's PLE layers, with the weights
// as the product uploads them (upload_model_weights) and the n-gram rows gathered on the host as
// the CUDA model does: the residual after the call, the conv state, and the per-row snapshots of
// a verification call, at 1, 3 and 37 rows from a random state. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_test.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/ops_vs_cpu.h"
#include "engine/model/fixture_engine.h"
#include "engine/model/fixture_forms.h"
#include "engine/model/layers.h"

namespace cherenkov::engine::cuda {
namespace {

using cherenkov::testing::FixtureEngine;

class OpsVsCpuPle : public DeviceTest, public ::testing::WithParamInterface<const char*> {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (IsSkipped()) return;
        engine_ = std::make_unique<FixtureEngine>(GetParam());
        device_ = upload_model_weights(*engine_->weights);
    }

    // One call of n_rows rows on both sides from the same random residual, state and n-gram ids.
    // Snapshots (one conv state per row) are asked for when `snapshots` (verification: T ≤ 4).
    void check(size_t layer, int64_t n_rows, bool snapshots, const std::string& what) {
        const auto& c = engine_->weights->config;
        const PleWeights& host = *engine_->weights->layers[layer].ple;
        const DevicePleWeights& device = *device_->layers[layer].ple;
        const int64_t width = c.hc_width();
        const int64_t n_heads = c.n_ngram_heads;
        const auto state_floats = static_cast<size_t>(c.ple_conv_state_len * width);
        const auto seed = static_cast<uint64_t>(layer * 1000 + n_rows);

        const std::vector<float> x =
            affine_test::random_vector(static_cast<size_t>(n_rows * width), seed);
        PleState state;
        state.conv = affine_test::random_vector(state_floats, seed + 1);
        uint64_t draw = seed + 2;
        std::vector<int64_t> ids(static_cast<size_t>(n_rows * n_heads));
        for (int64_t& id : ids) {
            id = static_cast<int64_t>(affine_test::splitmix(draw) % host.table_rows);
        }

        // CPU: x += the layer's output; the state and per-row snapshots advance.
        std::vector<float> cpu_x = x;
        PleState cpu_state = state;
        std::vector<RowSnapshot> rows(snapshots ? static_cast<size_t>(n_rows) : 0);
        for (RowSnapshot& row : rows) row.ple.resize(1);
        LayerContext cpu_ctx;
        cpu_ctx.config = &c;
        cpu_ctx.pool = &engine_->pool;
        cpu_ctx.layer_index = 0;
        cpu_ctx.snapshots = snapshots ? &rows : nullptr;
        engine::ple_forward(host, cpu_state, ids, cpu_x.data(), n_rows, cpu_ctx);

        // GPU: the rows gathered on the host, as CudaModel does, then the device layer.
        std::vector<float> embedding(static_cast<size_t>(n_rows * c.ple_embed_dim));
        for (int64_t t = 0; t < n_rows; ++t) {
            for (int64_t j = 0; j < n_heads; ++j) {
                host.gather_row(ids[static_cast<size_t>(t * n_heads + j)],
                                embedding.data() + t * c.ple_embed_dim + j * host.width);
            }
        }
        const DeviceBuffer d_embedding = ops_test::to_device(embedding);
        const DeviceBuffer d_x = ops_test::to_device(x);
        const DeviceBuffer d_conv = ops_test::to_device(state.conv);
        const DeviceBuffer d_snapshots =
            ops_test::poisoned(snapshots ? static_cast<size_t>(n_rows) * state_floats : 0);
        DevicePleState device_state{d_conv.as<float>()};
        DeviceContext ctx;
        ctx.config = &c;
        ctx.stream = stream_.get();
        ctx.ple_conv_snapshots = snapshots ? d_snapshots.as<float>() : nullptr;
        cuda::ple_forward(device, device_state, d_embedding.as<const float>(), d_x.as<float>(),
                          n_rows, ctx);
        stream_.synchronize();

        // The longest chain: the key projection (over P), its norm and the query's (over H per
        // stream), the gate's dot product (H), the conv input's norm and the conv (Kp taps). The
        // residual is compared against the size of what the layer added to it.
        const int64_t longest = std::max(c.ple_embed_dim, c.hidden_size);
        const double relative = ops_test::layer_rounding(longest, 5);
        std::vector<float> added(cpu_x.size());
        for (size_t i = 0; i < added.size(); ++i) added[i] = cpu_x[i] - x[i];
        const double added_rms = ops_test::rms(added);
        const std::vector<float> got_x = ops_test::to_host(d_x, x.size());
        ops_test::expect_within(
            "ple_forward", what + " residual", got_x, cpu_x, width, [&](size_t i) {
                return relative * (added_rms + std::fabs(added[i])) +
                       2.0 * ops_test::kUnitRoundoff * std::fabs(cpu_x[i]) + 1e-30;
            });
        ops_test::expect_within_layer("ple_forward", what + " conv state",
                                      ops_test::to_host(d_conv, state_floats), cpu_state.conv,
                                      width, relative);
        if (!snapshots) return;
        std::vector<float> cpu_snapshots;
        for (const RowSnapshot& row : rows) {
            cpu_snapshots.insert(cpu_snapshots.end(), row.ple[0].conv.begin(),
                                 row.ple[0].conv.end());
        }
        ops_test::expect_within_layer(
            "ple_forward", what + " snapshots",
            ops_test::to_host(d_snapshots, static_cast<size_t>(n_rows) * state_floats),
            cpu_snapshots, width, relative);
    }

    std::unique_ptr<FixtureEngine> engine_;
    std::unique_ptr<DeviceModelWeights> device_;
    ops_test::TestStream stream_;
};

TEST_P(OpsVsCpuPle, MatchesCpuOnEveryPleLayer) {
    const ModelWeights& w = *engine_->weights;
    int n_ple_layers = 0;
    for (size_t layer = 0; layer < w.layers.size(); ++layer) {
        if (!w.layers[layer].ple) continue;
        ++n_ple_layers;
        for (const int64_t n_rows : {int64_t{1}, int64_t{3}, int64_t{37}}) {
            const std::string what = std::string(GetParam()) + " layer " + std::to_string(layer) +
                                     " rows " + std::to_string(n_rows);
            check(layer, n_rows, n_rows == 3, what);
            if (HasFailure()) return;
        }
    }
    EXPECT_GT(n_ple_layers, 0) << GetParam() << " has no PLE layer";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OpsVsCpuPle, CHERENKOV_FIXTURE_FORMS,
                         cherenkov::testing::fixture_form_name);

}  // namespace
}  // namespace cherenkov::engine::cuda
