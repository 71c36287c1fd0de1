// The op-vs-CPU harness for the hyper-connection mix (ops_vs_cpu.h): cuda::hyper_connection_mix
// (hyper_connection.cu) against engine::hyper_connection_mix on every reference fixture's weights
// as the product uploads them (upload_model_weights): each layer's attention and MLP mixers (with
// the inject weights) and the final mixer (without), at 1, 3 and 37 rows. The fixtures cover
// 2, 3 and 4 streams. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
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

class OpsVsCpuHyperConnection : public DeviceTest,
                                public ::testing::WithParamInterface<const char*> {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (IsSkipped()) return;
        engine_ = std::make_unique<FixtureEngine>(GetParam());
        device_ = upload_model_weights(*engine_->weights);
    }

    // Runs one mixer on both sides for n_rows random residual rows and compares mix [T, H] and,
    // when the mixer has inject weights, inject [T, C].
    void check(const HyperConnectionWeights& host, const DeviceHyperConnectionWeights& device,
               int64_t n_rows, const std::string& what) {
        const auto& c = engine_->weights->config;
        const int64_t width = c.hc_width();
        const std::vector<float> x = affine_test::random_vector(
            static_cast<size_t>(n_rows * width), static_cast<uint64_t>(n_rows * 31 + width));
        const bool with_inject = host.inject.has_value();

        std::vector<float> mix(static_cast<size_t>(n_rows * c.hidden_size));
        std::vector<float> inject(static_cast<size_t>(n_rows * c.hc_count));
        LayerContext cpu_ctx;
        cpu_ctx.config = &c;
        cpu_ctx.pool = &engine_->pool;
        engine::hyper_connection_mix(host, x.data(), n_rows, cpu_ctx, mix.data(),
                                     with_inject ? inject.data() : nullptr);

        const DeviceBuffer d_x = ops_test::to_device(x);
        const DeviceBuffer d_mix = ops_test::poisoned(mix.size());
        const DeviceBuffer d_inject = ops_test::poisoned(inject.size());
        DeviceContext ctx;
        ctx.config = &c;
        ctx.stream = stream_.get();
        cuda::hyper_connection_mix(device, d_x.as<const float>(), n_rows, ctx, d_mix.as<float>(),
                                   with_inject ? d_inject.as<float>() : nullptr);
        stream_.synchronize();

        // mix: the norm over C·H, the down projection over C·H, the up projection over R and
        // the sum over the C streams; inject: the norm and its projection over C·H.
        const int64_t longest = std::max(width, c.hc_lowrank);
        ops_test::expect_within_layer("hyper_connection_mix", what + " mix",
                                      ops_test::to_host(d_mix, mix.size()), mix, c.hidden_size,
                                      ops_test::layer_rounding(longest, 4));
        if (!with_inject) return;
        ops_test::expect_within_layer("hyper_connection_mix", what + " inject",
                                      ops_test::to_host(d_inject, inject.size()), inject,
                                      c.hc_count, ops_test::layer_rounding(width, 2));
    }

    std::unique_ptr<FixtureEngine> engine_;
    std::unique_ptr<DeviceModelWeights> device_;
    ops_test::TestStream stream_;
};

TEST_P(OpsVsCpuHyperConnection, MixMatchesCpuForEveryMixer) {
    const ModelWeights& w = *engine_->weights;
    for (const int64_t n_rows : {int64_t{1}, int64_t{3}, int64_t{37}}) {
        const std::string rows = " rows " + std::to_string(n_rows);
        for (size_t layer = 0; layer < w.layers.size(); ++layer) {
            const std::string name = std::string(GetParam()) + " layer " + std::to_string(layer);
            check(w.layers[layer].attn_hc, device_->layers[layer].attn_hc, n_rows,
                  name + " attn" + rows);
            check(w.layers[layer].mlp_hc, device_->layers[layer].mlp_hc, n_rows,
                  name + " mlp" + rows);
            if (HasFailure()) return;
        }
        check(w.final_mixer, device_->final_mixer, n_rows,
              std::string(GetParam()) + " final" + rows);
        if (HasFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OpsVsCpuHyperConnection, CHERENKOV_FIXTURE_FORMS,
                         cherenkov::testing::fixture_form_name);

}  // namespace
}  // namespace cherenkov::engine::cuda
