// The GPU MoE block (engine/cuda/moe.cu) against engine::moe_forward on the CPU with the packed
// tiny_a fixture, for 1, 3 and 37 rows, with a pool holding every expert and one of a single slot
// (identical bits); and DeviceExpertPool's LRU order, pinning and counters. Skips without a
// device; in a build without CUDA it checks that construction says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_test.h"
#include "engine/cuda/moe_check.h"
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

class CudaMoe : public DeviceTest {
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
        moe_forward(w.layers[static_cast<size_t>(layer)].moe, next, mix.data(), n_rows, y.data(),
                    ctx);
        return y;
    }

    std::unique_ptr<FixtureEngine> engine_;
};

TEST_F(CudaMoe, MatchesCpuOnOneThreeAndThirtySevenRows) {
    MoeCheck gpu(*engine_->weights, engine_->experts, all_experts());
    for (int64_t layer = 0; layer < n_layers(); ++layer) {
        for (int64_t n_rows : kRowCounts) {
            SCOPED_TRACE("layer " + std::to_string(layer) + ", " + std::to_string(n_rows) +
                         " rows");
            const std::vector<float> mix =
                random_mix(n_rows * hidden(), static_cast<uint64_t>(layer * 100 + n_rows));
            ForwardTrace trace;
            const std::vector<float> expected = cpu(layer, mix, n_rows, &trace);
            const std::vector<float> actual = gpu.run(layer, mix, n_rows, true);
            // Rows from the first near-tie of the router on may pick other experts.
            const int64_t rows = testing::first_tie_row(trace, n_rows);
            const auto n = static_cast<size_t>(rows * hidden());
            const std::vector<float> e(expected.begin(), expected.begin() + static_cast<long>(n));
            const std::vector<float> a(actual.begin(), actual.begin() + static_cast<long>(n));
            float scale = 1.0F;
            for (float v : e) scale = std::max(scale, std::fabs(v));
            EXPECT_GT(rows, 0);
            EXPECT_LE(testing::max_abs_diff(a, e), 1e-4F * scale);
        }
    }
}

TEST_F(CudaMoe, MinimalPoolGivesIdenticalBits) {
    MoeCheck full(*engine_->weights, engine_->experts, all_experts());
    MoeCheck minimal(*engine_->weights, engine_->experts, 1);
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

// Trace tensors under the CPU's names and values, and the routing trace's lines.
// A row whose router logits are NaN (a NaN in the hidden state) still routes to `top` distinct
// experts in range (NaN ranks as −∞, ties go to the smaller index): the call finishes instead of
// asking the pool for an expert that does not exist.
TEST_F(CudaMoe, NanRowsStillRouteToExpertsInRange) {
    MoeCheck gpu(*engine_->weights, engine_->experts, all_experts());
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

TEST_F(CudaMoe, RecordsTheCpuTraceAndRoutingTrace) {
    MoeCheck gpu(*engine_->weights, engine_->experts, all_experts());
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
        EXPECT_LE(testing::max_abs_diff(a, e), 1e-4F * scale) << key;
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

// ---- DeviceExpertPool ----

constexpr int64_t kHidden = 64;
constexpr int64_t kInter = 128;

store::ExpertLayout test_layout(int bits) {
    return store::make_expert_layout(kHidden, kInter, bits, 64, 2, 0, 4);
}

// Host records with a distinct byte pattern each.
struct HostRecords {
    explicit HostRecords(const store::ExpertLayout& l) : layout(l) {
        for (uint64_t r = 0; r < l.n_records(); ++r) {
            std::vector<std::byte> bytes(l.record_bytes);
            for (size_t i = 0; i < bytes.size(); ++i) {
                bytes[i] = static_cast<std::byte>((r * 131 + i * 7 + (i >> 8)) & 0xFF);
            }
            records.push_back(std::move(bytes));
        }
    }
    ExpertWeights weights(int64_t layer, int32_t expert) const {
        ExpertWeights w =
            expert_weights_in_record(records[layout.record_index(layer, expert)].data(), layout);
        w.bits = layout.bits;
        return w;
    }
    bool matches(const std::vector<std::byte>& slot, int64_t layer, int32_t expert) const {
        const std::vector<std::byte>& r = records[layout.record_index(layer, expert)];
        return std::memcmp(slot.data(), r.data(), layout.down.biases.end()) == 0;
    }
    store::ExpertLayout layout;
    std::vector<std::vector<std::byte>> records;
};

class CudaDeviceExpertPool : public DeviceTest {};

TEST(DeviceExpertPoolSize, SlotsHoldTheLargestPrecisionRoundedTo256) {
    const store::ExpertLayout q4 = test_layout(4);
    const store::ExpertLayout q2 = test_layout(2);
    EXPECT_EQ(DeviceExpertPool::slot_bytes_for(q4), store::align_up(q4.down.biases.end(), 256));
    EXPECT_EQ(DeviceExpertPool::slot_bytes_for(q2, 4), DeviceExpertPool::slot_bytes_for(q4));
    EXPECT_LT(DeviceExpertPool::slot_bytes_for(q2), DeviceExpertPool::slot_bytes_for(q4));
    EXPECT_LE(DeviceExpertPool::slot_bytes_for(q4), q4.record_bytes);
    const uint64_t slot = DeviceExpertPool::slot_bytes_for(q4);
    EXPECT_EQ(DeviceExpertPool::slots_for_bytes(q4, 10 * slot + slot / 2), 10);
}

TEST_F(CudaDeviceExpertPool, EvictsTheLeastRecentlyUsedSlotAndCounts) {
    const HostRecords host(test_layout(4));
    DeviceExpertPool pool(host.layout, 2, nullptr);
    const DeviceExpert a = pool.acquire(0, 0, host.weights(0, 0));
    pool.release_pinned();
    pool.acquire(0, 1, host.weights(0, 1));
    pool.release_pinned();
    const DeviceExpert a_again = pool.acquire(0, 0, host.weights(0, 0));  // hit: now newest
    pool.release_pinned();
    EXPECT_EQ(a_again.slot, a.slot);
    EXPECT_EQ(a_again.address.down_codes, a.address.down_codes);
    const DeviceExpert c = pool.acquire(1, 2, host.weights(1, 2));  // evicts (0, 1)
    pool.release_pinned();
    pool.wait_host_copies();
    EXPECT_EQ(pool.slot_of(0, 1, 4), -1);
    EXPECT_EQ(pool.slot_of(0, 0, 4), a.slot);
    EXPECT_EQ(pool.slot_of(1, 2, 4), c.slot);
    EXPECT_NE(c.slot, a.slot);
    EXPECT_TRUE(host.matches(pool.read_slot(a.slot), 0, 0));
    EXPECT_TRUE(host.matches(pool.read_slot(c.slot), 1, 2));

    const DeviceExpertPoolCounters n = pool.counters();
    EXPECT_EQ(n.hits, 1U);
    EXPECT_EQ(n.uploads, 3U);
    EXPECT_EQ(n.evictions, 1U);
    EXPECT_EQ(n.bytes_uploaded, 3 * host.layout.down.biases.end());
    EXPECT_EQ(pool.bytes(), 2 * pool.slot_bytes());

    // The device addresses follow the store's part offsets inside the slot.
    EXPECT_EQ(
        reinterpret_cast<const std::byte*>(c.address.down_biases) -
            reinterpret_cast<const std::byte*>(c.address.gate_codes),
        static_cast<ptrdiff_t>(host.layout.down.biases.offset - host.layout.gate.codes.offset));
    EXPECT_EQ(c.shape.bits, 4);
    EXPECT_EQ(c.shape.hidden, kHidden);
    EXPECT_EQ(c.shape.intermediate, kInter);
}

TEST_F(CudaDeviceExpertPool, NeverEvictsPinnedSlots) {
    const HostRecords host(test_layout(4));
    DeviceExpertPool pool(host.layout, 2, nullptr);
    const DeviceExpert a = pool.acquire(0, 0, host.weights(0, 0));
    const DeviceExpert b = pool.acquire(0, 1, host.weights(0, 1));
    EXPECT_TRUE(pool.pinned(a.slot));
    EXPECT_TRUE(pool.pinned(b.slot));
    try {
        pool.acquire(0, 2, host.weights(0, 2));
        FAIL() << "acquire with every slot pinned did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::ResourceExhausted);
    }
    pool.release_pinned();
    EXPECT_FALSE(pool.pinned(a.slot));
    EXPECT_FALSE(pool.pinned(b.slot));
    const DeviceExpert c = pool.acquire(0, 2, host.weights(0, 2));  // the oldest, (0, 0), goes
    pool.finish_batch();
    EXPECT_EQ(c.slot, a.slot);
    EXPECT_FALSE(pool.pinned(c.slot));
    EXPECT_EQ(pool.slot_of(0, 0, 4), -1);
    EXPECT_TRUE(host.matches(pool.read_slot(c.slot), 0, 2));
    EXPECT_TRUE(host.matches(pool.read_slot(b.slot), 0, 1));
}

TEST_F(CudaDeviceExpertPool, KeepsPrecisionsInSeparateSlots) {
    const HostRecords q4(test_layout(4));
    const HostRecords q2(test_layout(2));
    DeviceExpertPool pool(q4.layout, 3, nullptr);
    const DeviceExpert high = pool.acquire(1, 3, q4.weights(1, 3));
    const DeviceExpert low = pool.acquire(1, 3, q2.weights(1, 3));
    pool.release_pinned();
    pool.wait_host_copies();
    EXPECT_NE(high.slot, low.slot);
    EXPECT_EQ(low.shape.bits, 2);
    EXPECT_EQ(pool.slot_of(1, 3, 2), low.slot);
    EXPECT_EQ(pool.slot_of(1, 3, 4), high.slot);
    EXPECT_EQ(reinterpret_cast<const std::byte*>(low.address.down_codes) -
                  reinterpret_cast<const std::byte*>(low.address.gate_codes),
              static_cast<ptrdiff_t>(q2.layout.down.codes.offset - q2.layout.gate.codes.offset));
    EXPECT_TRUE(q2.matches(pool.read_slot(low.slot), 1, 3));
    EXPECT_TRUE(q4.matches(pool.read_slot(high.slot), 1, 3));
}

// A pool that can hold the whole table puts a layer's addresses on the device once every expert
// of it is resident, and lists what a layer misses while few are missing; a smaller pool does
// neither; an eviction (here: other precisions taking the slots) takes the layer off again.
TEST_F(CudaDeviceExpertPool, PutsALayerHeldWholeOnTheDeviceUntilAnEviction) {
    const HostRecords q4(test_layout(4));
    const HostRecords q2(test_layout(2));
    DeviceExpertPool pool(q4.layout, 8, nullptr);  // 2 layers × 4 experts
    for (const int32_t e : {0, 1, 2}) pool.acquire(0, e, q4.weights(0, e));
    pool.release_pinned();
    EXPECT_EQ(pool.layer_addresses(0), nullptr);
    EXPECT_EQ(pool.missing_in_layer(0, 1), std::vector<int32_t>{3});
    EXPECT_TRUE(pool.missing_in_layer(1, 3).empty());  // 4 missing
    EXPECT_EQ(pool.missing_in_layer(1, 4), (std::vector<int32_t>{0, 1, 2, 3}));
    pool.leave_incomplete(1);
    EXPECT_TRUE(pool.missing_in_layer(1, 4).empty());

    pool.acquire(0, 3, q4.weights(0, 3));
    pool.release_pinned();
    ASSERT_NE(pool.layer_addresses(0), nullptr);
    EXPECT_EQ(pool.layer_addresses(1), nullptr);
    EXPECT_EQ(pool.n_layers_on_device(), 1);
    EXPECT_TRUE(pool.missing_in_layer(0, 4).empty());
    const std::vector<ExpertAddress> addresses = pool.read_layer_addresses(0);
    for (int32_t e = 0; e < 4; ++e) {
        const std::optional<DeviceExpert> resident = pool.acquire_resident(0, e, 4);
        ASSERT_TRUE(resident.has_value());
        EXPECT_EQ(addresses[static_cast<size_t>(e)].gate_codes, resident->address.gate_codes);
        EXPECT_EQ(addresses[static_cast<size_t>(e)].down_biases, resident->address.down_biases);
    }
    pool.release_pinned();
    pool.release_layer(0);

    // Four 2-bit records take the free slots; the fifth evicts the least recently used slot,
    // one of layer 0's.
    for (const int32_t e : {0, 1, 2, 3}) pool.acquire(1, e, q2.weights(1, e));
    pool.release_pinned();
    EXPECT_NE(pool.layer_addresses(0), nullptr);
    pool.acquire(0, 0, q2.weights(0, 0));
    pool.release_pinned();
    EXPECT_EQ(pool.counters().evictions, 1U);
    EXPECT_EQ(pool.layer_addresses(0), nullptr);
    EXPECT_EQ(pool.n_layers_on_device(), 0);

    DeviceExpertPool small(q4.layout, 7, nullptr);
    for (const int32_t e : {0, 1, 2, 3}) small.acquire(0, e, q4.weights(0, e));
    small.release_pinned();
    EXPECT_EQ(small.layer_addresses(0), nullptr);
    EXPECT_TRUE(small.missing_in_layer(1, 4).empty());
}

TEST(DeviceExpertPoolUnavailable, ConstructionSaysBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    try {
        DeviceExpertPool pool(test_layout(4), 2, nullptr);
        FAIL() << "DeviceExpertPool did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
