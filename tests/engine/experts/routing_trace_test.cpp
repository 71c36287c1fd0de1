#include "engine/experts/routing_trace.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "base/error.h"
#include "engine/experts/expert_cache.h"
#include "engine/experts/expert_test_tables.h"
#include "engine/experts/trace_replay.h"

namespace cherenkov::engine {
namespace {

using cherenkov::testing::TempDir;

TEST(RoutingTrace, ParsesTheTextFormatAndWritesItBack) {
    std::istringstream in(
        "# step layer row expert:weight ...\n"
        "0 0 0 17:0.5 3:0.25\n"
        "0 0 1 17:0.4 9:0.125\n"
        "\n"
        "0 1 0 2:0.75 1:0.25\n"
        "1 0 0 3:0.5 4:0.5\n");
    const RoutingTrace trace = parse_routing_trace(in, "trace.txt");
    EXPECT_EQ(trace.n_layers, 2);
    EXPECT_EQ(trace.n_experts, 18);
    ASSERT_EQ(trace.layer_steps.size(), 3u);
    EXPECT_EQ(trace.layer_steps[0].rows.size(), 2u);
    const std::vector<ExpertRequest> unioned = trace.layer_steps[0].union_requests();
    ASSERT_EQ(unioned.size(), 3u);
    EXPECT_EQ(unioned[0].expert, 17);
    EXPECT_FLOAT_EQ(unioned[0].max_weight, 0.5F);
    EXPECT_EQ(trace.layer_steps[2].step, 1);

    std::ostringstream out;
    write_routing_trace(out, trace);
    std::istringstream again(out.str());
    const RoutingTrace reparsed = parse_routing_trace(again, "again");
    ASSERT_EQ(reparsed.layer_steps.size(), 3u);
    EXPECT_EQ(reparsed.layer_steps[0].rows[1][1].expert, 9);
    EXPECT_FLOAT_EQ(reparsed.layer_steps[0].rows[1][1].weight, 0.125F);
}

TEST(RoutingTrace, RejectsMalformedLinesNamingThem) {
    for (const char* bad : {"0 0 0\n", "0 0 0 3\n", "0 0 0 x:0.5\n", "0 0 1 3:0.5\n", "a b c\n"}) {
        std::istringstream in(bad);
        try {
            parse_routing_trace(in, "bad.txt");
            FAIL() << "accepted " << bad;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("bad.txt: line 1"), std::string::npos) << e.what();
        }
    }
}

TEST(RoutingTrace, SyntheticTraceIsDeterministicAndWellFormed) {
    SyntheticTraceOptions options;
    options.n_steps = 20;
    options.n_layers = 3;
    options.n_experts = 32;
    options.top_k = 4;
    options.n_rows = 2;
    const RoutingTrace a = make_synthetic_trace(options);
    const RoutingTrace b = make_synthetic_trace(options);
    ASSERT_EQ(a.layer_steps.size(), 60u);
    for (size_t index = 0; index < a.layer_steps.size(); ++index) {
        const TraceLayerStep& group = a.layer_steps[index];
        EXPECT_EQ(group.step, static_cast<int64_t>(index / 3));
        EXPECT_EQ(group.layer, static_cast<int64_t>(index % 3));
        ASSERT_EQ(group.rows.size(), 2u);
        for (size_t row = 0; row < 2; ++row) {
            std::set<int32_t> distinct;
            float sum = 0.0F;
            for (const RoutedExpert& choice : group.rows[row]) {
                distinct.insert(choice.expert);
                sum += choice.weight;
                EXPECT_EQ(choice.expert,
                          b.layer_steps[index].rows[row][distinct.size() - 1].expert);
            }
            EXPECT_EQ(distinct.size(), 4u);
            EXPECT_NEAR(sum, 1.0F, 1e-5F);
            EXPECT_GE(group.rows[row][0].weight, group.rows[row][3].weight);
        }
    }
    options.seed = 2;
    const RoutingTrace c = make_synthetic_trace(options);
    bool differs = false;
    for (size_t index = 0; index < c.layer_steps.size(); ++index) {
        differs |= c.layer_steps[index].rows[0][0].expert != a.layer_steps[index].rows[0][0].expert;
    }
    EXPECT_TRUE(differs);
}

// Replays one synthetic trace through LRU and frequency-aware caches of several sizes. Asserts
// only invariants: hit rates in [0, 1], every selection delivered with the right bytes, and the
// counters adding up. Hit rate is not monotone in pool size in general, so it is not asserted.
TEST(TraceReplay, LruAndFrequencyPoliciesServeASyntheticTrace) {
    TempDir dir;
    constexpr int64_t kLayers = 4;
    constexpr int64_t kExperts = 32;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, kLayers, kExperts);
    SyntheticTraceOptions trace_options;
    trace_options.n_steps = 40;
    trace_options.n_layers = kLayers;
    trace_options.n_experts = kExperts;
    trace_options.top_k = 4;
    trace_options.n_rows = 2;
    const RoutingTrace trace = make_synthetic_trace(trace_options);
    uint64_t expected_selections = 0;
    for (const TraceLayerStep& group : trace.layer_steps) {
        expected_selections += group.union_requests().size();
    }

    for (const ReplacementKind kind : {ReplacementKind::Lru, ReplacementKind::Frequency}) {
        for (const uint64_t n_slots : {8u, 24u, 64u, 128u}) {
            ExpertCacheOptions options;
            options.tables[4] = table;
            options.n_slots = n_slots;
            options.policy = kind;
            options.lookahead = true;
            ExpertCache cache(std::move(options));
            uint64_t bad_records = 0;
            ReplayOptions replay;
            replay.prediction_accuracy = 0.7;
            replay.on_expert = [&](int64_t layer, int32_t expert, const ExpertWeights& weights) {
                if (!testing::record_matches(testing::record_of(weights), table.layout, layer,
                                             expert, 4)) {
                    ++bad_records;
                }
            };
            const ReplayResult result = replay_trace(cache, trace, replay);
            cache.wait_idle();
            EXPECT_EQ(bad_records, 0u);
            EXPECT_EQ(result.experts_delivered, expected_selections);
            const ExpertStats stats = cache.stats();
            const LayerCounters total = stats.total();
            EXPECT_EQ(stats.steps, 40u);
            EXPECT_EQ(total.experts.selections, expected_selections);
            EXPECT_EQ(total.experts.hits + total.experts.misses, expected_selections);
            EXPECT_GE(stats.hit_rate(), 0.0);
            EXPECT_LE(stats.hit_rate(), 1.0);
            EXPECT_LE(total.experts.prefetches_used, total.experts.prefetches_issued);
            EXPECT_GT(total.prediction.fetches, 0u);
            EXPECT_LE(total.prediction.recall(), 1.0);
            if (n_slots >= static_cast<uint64_t>(kLayers * kExperts)) {
                // Everything fits: each record is read at most once.
                EXPECT_LE(total.quant[0].demand.reads_ok + total.quant[0].prefetch.reads_ok,
                          static_cast<uint64_t>(kLayers * kExperts));
            }
        }
    }
}

}  // namespace
}  // namespace cherenkov::engine
