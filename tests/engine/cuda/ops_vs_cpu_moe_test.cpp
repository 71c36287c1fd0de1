// The op-vs-CPU harness for the MoE block (ops_vs_cpu.h): router top-k, the routed experts'
// SwiGLU and the combine, through cuda::moe_forward (experts fetched into a DeviceExpertPool) and
// cuda::moe_forward_on_device (routing into an address table on the device), against
// engine::moe_forward on the packed tiny_a fixture with the weights the product uploads
// (upload_model_weights): 1, 3 and 37 rows, a pool holding every expert and one of a single slot
// (identical bits), the trace and routing trace, and NaN rows. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_test.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/ops_vs_cpu.h"
#include "engine/model/fixture_engine.h"
#include "engine/model/layers.h"

namespace cherenkov::engine::cuda {
namespace {

using cherenkov::testing::FixtureEngine;

constexpr int64_t kRowCounts[] = {1, 3, 37};

uint64_t splitmix(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

std::vector<float> random_mix(int64_t n, uint64_t seed) {
    uint64_t state = seed * 0x100000001B3ULL + 7;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
        x = 2.0F * (static_cast<float>(splitmix(state) >> 40) / static_cast<float>(1 << 24)) - 1.0F;
    }
    return v;
}

// The device MoE block driven from the host: the model's device weights, a pool of `pool_slots`
// slots for the fixture's expert layout, and one stream. `weights` and `experts` must outlive it.
// Without `shared_entry` the layers' shared experts lose their expert-table entry, so the shared
// expert takes its own four launches, as it does in a model whose shared expert is not at the
// routed experts' precision.
class DeviceMoe {
public:
    DeviceMoe(const ModelWeights& weights, ExpertSource& experts, int64_t pool_slots,
              bool shared_entry = true)
        : weights_(&weights),
          experts_(&experts),
          device_(upload_model_weights(weights)),
          pool_(std::make_unique<DeviceExpertPool>(experts.layout(), pool_slots, stream_.get())) {
        if (shared_entry) return;
        for (DeviceLayerWeights& layer : device_->layers) layer.moe.shared_expert = nullptr;
    }
    ~DeviceMoe() {
        pool_.reset();  // before the stream it fences on
    }
    DeviceMoe(const DeviceMoe&) = delete;
    DeviceMoe& operator=(const DeviceMoe&) = delete;

    int64_t n_layers() const { return static_cast<int64_t>(device_->layers.size()); }

    // y [T, H] of moe_forward for trunk layer `layer` on mix [T, H], with layer + 1 as `next`
    // (lookahead) when `lookahead` and that layer exists. `trace` and `routing_trace` as in
    // DeviceContext (prefix "layers.<layer>."), `trace_step` numbers routing-trace lines.
    std::vector<float> run(int64_t layer, const std::vector<float>& mix, int64_t n_rows,
                           bool lookahead, ForwardTrace* trace = nullptr,
                           std::ostream* routing_trace = nullptr, int64_t trace_step = 0) {
        const DeviceBuffer d_mix = ops_test::to_device(mix);
        const DeviceBuffer d_y = ops_test::poisoned(mix.size());
        DeviceContext ctx = context(layer);
        ctx.trace = trace;
        ctx.routing_trace = routing_trace;
        ctx.trace_step = trace_step;
        const DeviceMoeWeights* next =
            lookahead && layer + 1 < n_layers() ? &moe(layer + 1) : nullptr;
        moe_forward(moe(layer), next, d_mix.as<const float>(), n_rows, d_y.as<float>(), ctx);
        stream_.synchronize();
        return ops_test::to_host(d_y, mix.size());
    }

    // y of moe_forward_on_device, the layer's routing turned into an address table on the
    // device; empty when moe_on_device declines the call (the pool does not hold the layer whole).
    std::vector<float> run_on_device(int64_t layer, const std::vector<float>& mix, int64_t n_rows) {
        const DeviceContext ctx = context(layer);
        const ExpertAddress* addresses = moe_on_device(moe(layer), n_rows, ctx);
        if (addresses == nullptr) return {};
        const DeviceBuffer d_mix = ops_test::to_device(mix);
        const DeviceBuffer d_y = ops_test::poisoned(mix.size());
        moe_forward_on_device(moe(layer), addresses, d_mix.as<const float>(), n_rows,
                              d_y.as<float>(), ctx);
        pool_->release_layer(moe(layer).table_layer);
        stream_.synchronize();
        return ops_test::to_host(d_y, mix.size());
    }

    const DeviceExpertPool& pool() const { return *pool_; }

private:
    const DeviceMoeWeights& moe(int64_t layer) const {
        return device_->layers[static_cast<size_t>(layer)].moe;
    }
    DeviceContext context(int64_t layer) const {
        if (layer < 0 || layer >= n_layers()) {
            throw_invalid("[ops_vs_cpu_moe] layer " + std::to_string(layer) + " of " +
                          std::to_string(n_layers()));
        }
        DeviceContext ctx;
        ctx.config = &weights_->config;
        ctx.stream = stream_.get();
        ctx.experts = experts_;
        ctx.expert_pool = pool_.get();
        ctx.trace_prefix = "layers." + std::to_string(layer) + ".";
        return ctx;
    }

    const ModelWeights* weights_;
    ExpertSource* experts_;
    ops_test::TestStream stream_;
    std::unique_ptr<DeviceModelWeights> device_;
    std::unique_ptr<DeviceExpertPool> pool_;
};

class OpsVsCpuMoe : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (IsSkipped()) return;
        engine_ = std::make_unique<FixtureEngine>("tiny_a/hf_flat_fused");
    }

    int64_t n_layers() const { return static_cast<int64_t>(engine_->weights->layers.size()); }
    int64_t hidden() const { return engine_->weights->config.hidden_size; }
    int64_t all_experts() const {
        return static_cast<int64_t>(engine_->experts.layout().n_records());
    }

    // engine::moe_forward of `layer` (with layer + 1 as lookahead when it exists).
    std::vector<float> cpu(int64_t layer, const std::vector<float>& mix, int64_t n_rows,
                           ForwardTrace* trace = nullptr, std::ostream* routing_trace = nullptr) {
        const ModelWeights& w = *engine_->weights;
        LayerContext ctx;
        ctx.config = &w.config;
        ctx.pool = &engine_->pool;
        ctx.experts = &engine_->experts;
        ctx.trace = trace;
        ctx.trace_prefix = "layers." + std::to_string(layer) + ".";
        ctx.routing_trace = routing_trace;
        const MoeWeights* next =
            layer + 1 < n_layers() ? &w.layers[static_cast<size_t>(layer + 1)].moe : nullptr;
        std::vector<float> y(mix.size());
        engine::moe_forward(w.layers[static_cast<size_t>(layer)].moe, next, mix.data(), n_rows,
                            y.data(), ctx);
        return y;
    }

    // The device output against the CPU's over the rows before the router's first near-tie
    // (rows from there on may pick other experts): within 1e-4 of the largest |y| (at least 1).
    void expect_matches_cpu(const std::vector<float>& actual, const std::vector<float>& expected,
                            const ForwardTrace& trace, int64_t n_rows, const std::string& what) {
        const int64_t rows = testing::first_tie_row(trace, n_rows);
        EXPECT_GT(rows, 0) << what;
        const auto n = static_cast<size_t>(rows * hidden());
        const std::vector<float> e(expected.begin(), expected.begin() + static_cast<long>(n));
        const std::vector<float> a(actual.begin(), actual.begin() + static_cast<long>(n));
        float scale = 1.0F;
        for (float v : e) scale = std::max(scale, std::fabs(v));
        ops_test::expect_within("moe", what, a, e, hidden(), 1e-4 * scale);
    }

    // moe_forward of every layer at 1, 3 and 37 rows against the CPU.
    void check_layers(DeviceMoe& gpu, const std::string& form);

    std::unique_ptr<FixtureEngine> engine_;
};

// Both forms of the shared expert: inside the routed experts' launches, and on its own.
TEST_F(OpsVsCpuMoe, MatchesCpuOnOneThreeAndThirtySevenRows) {
    for (const bool shared_entry : {true, false}) {
        DeviceMoe gpu(*engine_->weights, engine_->experts, all_experts(), shared_entry);
        check_layers(gpu, shared_entry ? "shared entry, " : "shared alone, ");
        if (HasFailure()) return;
    }
}

void OpsVsCpuMoe::check_layers(DeviceMoe& gpu, const std::string& form) {
    for (int64_t layer = 0; layer < n_layers(); ++layer) {
        for (int64_t n_rows : kRowCounts) {
            const std::string what =
                form + "layer " + std::to_string(layer) + ", " + std::to_string(n_rows) + " rows";
            const std::vector<float> mix =
                random_mix(n_rows * hidden(), static_cast<uint64_t>(layer * 100 + n_rows));
            ForwardTrace trace;
            const std::vector<float> expected = cpu(layer, mix, n_rows, &trace);
            const std::vector<float> actual = gpu.run(layer, mix, n_rows, true);
            expect_matches_cpu(actual, expected, trace, n_rows, what);
        }
    }
}

// Decode rows of a layer the pool holds whole take the address-table path: the CPU's output, and
// moe_forward's bits.
TEST_F(OpsVsCpuMoe, AddressTablePathMatchesCpuAndThePoolPath) {
    DeviceMoe gpu(*engine_->weights, engine_->experts, all_experts());
    for (int64_t layer = 0; layer < n_layers(); ++layer) {
        // 256 random rows route to every expert of the fixture's layers (4 experts, top 2),
        // making them resident.
        gpu.run(layer, random_mix(256 * hidden(), 9), 256, false);
        for (const int64_t n_rows : {int64_t{1}, int64_t{3}, int64_t{4}}) {
            const std::string what = "address table, layer " + std::to_string(layer) + ", " +
                                     std::to_string(n_rows) + " rows";
            const std::vector<float> mix =
                random_mix(n_rows * hidden(), static_cast<uint64_t>(layer * 10 + n_rows));
            const std::vector<float> on_device = gpu.run_on_device(layer, mix, n_rows);
            ASSERT_FALSE(on_device.empty())
                << what << ": moe_on_device declined the call; experts not resident: "
                << gpu.pool().missing_in_layer(layer, all_experts()).size();
            ForwardTrace trace;
            const std::vector<float> expected = cpu(layer, mix, n_rows, &trace);
            expect_matches_cpu(on_device, expected, trace, n_rows, what);
            const std::vector<float> pooled = gpu.run(layer, mix, n_rows, false);
            EXPECT_EQ(std::memcmp(on_device.data(), pooled.data(), pooled.size() * sizeof(float)),
                      0)
                << what << ": not moe_forward's bits";
        }
    }
}

TEST_F(OpsVsCpuMoe, MinimalPoolGivesIdenticalBits) {
    DeviceMoe full(*engine_->weights, engine_->experts, all_experts());
    DeviceMoe minimal(*engine_->weights, engine_->experts, 1);
    for (int64_t layer = 0; layer < n_layers(); ++layer) {
        for (int64_t n_rows : kRowCounts) {
            SCOPED_TRACE("layer " + std::to_string(layer) + ", " + std::to_string(n_rows) +
                         " rows");
            const std::vector<float> mix =
                random_mix(n_rows * hidden(), static_cast<uint64_t>(layer * 1000 + n_rows));
            const std::vector<float> a = full.run(layer, mix, n_rows, true);
            const std::vector<float> b = minimal.run(layer, mix, n_rows, false);
            const std::vector<float> again = full.run(layer, mix, n_rows, true);  // all hits
            ASSERT_EQ(a.size(), b.size());
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
            EXPECT_EQ(std::memcmp(a.data(), again.data(), a.size() * sizeof(float)), 0);
            for (float v : a) ASSERT_TRUE(std::isfinite(v));
        }
    }
    EXPECT_GT(full.pool().counters().hits, 0U);
    EXPECT_EQ(full.pool().counters().evictions, 0U);
    EXPECT_GT(minimal.pool().counters().evictions, 0U);
}

// A row whose router logits are NaN (a NaN in the hidden state) still routes to `top` distinct
// experts in range (NaN ranks as −∞, ties go to the smaller index): the call finishes instead of
// asking the pool for an expert that does not exist.
TEST_F(OpsVsCpuMoe, NanRowsStillRouteToExpertsInRange) {
    DeviceMoe gpu(*engine_->weights, engine_->experts, all_experts());
    const int64_t n_rows = 3;
    std::vector<float> mix = random_mix(n_rows * hidden(), 5);
    for (int64_t d = 0; d < hidden(); ++d) mix[static_cast<size_t>(hidden() + d)] = NAN;  // row 1
    std::ostringstream routing;
    gpu.run(0, mix, n_rows, true, nullptr, &routing);
    const int64_t top = engine_->weights->config.num_experts_per_tok;
    const int64_t n_experts = engine_->weights->config.num_experts;
    std::istringstream lines(routing.str());
    std::string line;
    int64_t n_lines = 0;
    while (std::getline(lines, line)) {
        std::istringstream tokens(line);
        int64_t step = 0, layer = 0, row = 0;
        tokens >> step >> layer >> row;
        std::vector<int64_t> experts;
        std::string choice;
        while (tokens >> choice) experts.push_back(std::stoll(choice.substr(0, choice.find(':'))));
        ASSERT_EQ(static_cast<int64_t>(experts.size()), top) << line;
        for (const int64_t e : experts) {
            EXPECT_GE(e, 0) << line;
            EXPECT_LT(e, n_experts) << line;
        }
        std::sort(experts.begin(), experts.end());
        EXPECT_EQ(std::adjacent_find(experts.begin(), experts.end()), experts.end()) << line;
        ++n_lines;
    }
    EXPECT_EQ(n_lines, n_rows);
}

// Trace tensors under the CPU's names and values (the router logits and top-k margin among them),
// and the routing trace's lines.
TEST_F(OpsVsCpuMoe, RecordsTheCpuTraceAndRoutingTrace) {
    DeviceMoe gpu(*engine_->weights, engine_->experts, all_experts());
    const int64_t n_rows = 3;
    const std::vector<float> mix = random_mix(n_rows * hidden(), 42);
    ForwardTrace cpu_trace;
    ForwardTrace gpu_trace;
    std::ostringstream cpu_routing;
    std::ostringstream gpu_routing;
    cpu(0, mix, n_rows, &cpu_trace, &cpu_routing);
    gpu.run(0, mix, n_rows, true, &gpu_trace, &gpu_routing);
    for (const char* name :
         {"moe.router_logits", "moe.margin", "moe.shared_out", "moe.routed_out", "moe.out"}) {
        const std::string key = std::string("layers.0.") + name;
        ASSERT_TRUE(gpu_trace.tensors.count(key) == 1) << key;
        const std::vector<float>& e = cpu_trace.tensors.at(key);
        const std::vector<float>& a = gpu_trace.tensors.at(key);
        ASSERT_EQ(a.size(), e.size()) << key;
        float scale = 1.0F;
        for (float v : e) scale = std::max(scale, std::fabs(v));
        ops_test::expect_within("moe trace", key, a, e, static_cast<int64_t>(e.size() / n_rows),
                                1e-4 * scale);
    }
    // Same lines and expert ids; weights printed from float32 that may differ in the last bits.
    std::istringstream expected(cpu_routing.str());
    std::istringstream actual(gpu_routing.str());
    std::string e_line;
    std::string a_line;
    int lines = 0;
    while (std::getline(expected, e_line)) {
        ASSERT_TRUE(std::getline(actual, a_line));
        std::istringstream e_tokens(e_line);
        std::istringstream a_tokens(a_line);
        std::string e_token;
        std::string a_token;
        while (e_tokens >> e_token) {
            ASSERT_TRUE(a_tokens >> a_token) << a_line;
            const size_t colon = e_token.find(':');
            if (colon == std::string::npos) {
                EXPECT_EQ(a_token, e_token) << a_line;
                continue;
            }
            EXPECT_EQ(a_token.substr(0, colon + 1), e_token.substr(0, colon + 1)) << a_line;
            EXPECT_NEAR(std::stof(a_token.substr(colon + 1)), std::stof(e_token.substr(colon + 1)),
                        1e-5F);
        }
        EXPECT_FALSE(a_tokens >> a_token) << a_line;
        ++lines;
    }
    EXPECT_EQ(lines, n_rows);
    EXPECT_FALSE(std::getline(actual, a_line));
}

}  // namespace
}  // namespace cherenkov::engine::cuda
