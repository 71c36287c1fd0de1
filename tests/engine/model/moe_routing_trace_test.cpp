// One routing-trace writer for every backend: the CPU model's trace of a greedy run with drafts,
// and a fake backend handing the same routing to write_trace_layer as flat [rows, top_k] arrays
// (the way the CUDA MoE reads its routing back), give the same text; the trace replays through
// the expert cache, one fetch per (step, layer) with its union.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine/experts/expert_cache.h"
#include "engine/experts/expert_source_factory.h"
#include "engine/experts/routing_trace.h"
#include "engine/experts/trace_replay.h"
#include "engine/generate/generator.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

constexpr const char* kCheckpoint = "tiny_a/hf_flat_fused";

std::string cpu_trace(const std::vector<int32_t>& prompt) {
    FixtureEngine engine(kCheckpoint);
    std::ostringstream trace;
    engine.model.set_routing_trace(&trace);
    engine::GenerationOptions options;
    options.max_tokens = 12;
    options.stop_at_eos = false;
    options.drafts = 2;
    engine::Generator generator(engine.model, options);
    generator.generate(prompt, [](int32_t) { return true; });
    engine.model.set_routing_trace(nullptr);
    return trace.str();
}

// A backend that has its routing as flat arrays per layer and step.
std::string fake_backend_trace(const engine::RoutingTrace& routing, int64_t top_k) {
    std::ostringstream trace;
    for (const engine::TraceLayerStep& group : routing.layer_steps) {
        std::vector<int32_t> experts;
        std::vector<float> weights;
        for (const std::vector<engine::RoutedExpert>& row : group.rows) {
            for (const engine::RoutedExpert& choice : row) {
                experts.push_back(choice.expert);
                weights.push_back(choice.weight);
            }
        }
        engine::write_trace_layer(trace, group.step, group.layer, top_k, experts, weights);
    }
    return trace.str();
}

TEST(MoeRoutingTrace, CpuAndAFakeBackendWriteTheSameTraceWhichReplays) {
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    const std::string cpu = cpu_trace(prompt);
    std::istringstream in(cpu);
    const engine::RoutingTrace routing = engine::parse_routing_trace(in, "cpu trace");
    ASSERT_FALSE(routing.layer_steps.empty());
    const auto weights = engine::load_model_weights(packed_fixture(kCheckpoint));
    const int64_t top_k = weights->config.num_experts_per_tok;
    size_t most_rows = 0;
    for (const engine::TraceLayerStep& group : routing.layer_steps) {
        most_rows = std::max(most_rows, group.rows.size());
        for (const auto& row : group.rows) ASSERT_EQ(static_cast<int64_t>(row.size()), top_k);
    }
    EXPECT_GT(most_rows, 1U);  // the prompt's rows, or a token with its drafts

    EXPECT_EQ(fake_backend_trace(routing, top_k), cpu);
    std::ostringstream rewritten;
    engine::write_routing_trace(rewritten, routing);
    EXPECT_EQ(rewritten.str(), "# step layer row expert:weight ...\n" + cpu);

    engine::ExpertSourceOptions options;
    options.cache.tables = engine::find_expert_tables(weights->store_dir, std::vector<int>{4});
    options.cache.resident_bits = 4;
    options.pool = engine::parse_pool_setting("max");
    options.max_rows = 3;
    options.top_k = top_k;
    engine::BuiltExpertSource built = engine::make_expert_source(std::move(options));
    auto* cache = dynamic_cast<engine::ExpertCache*>(built.source.get());
    ASSERT_NE(cache, nullptr);
    const engine::ReplayResult replayed = engine::replay_trace(*cache, routing, {});
    uint64_t union_size = 0;
    for (const engine::TraceLayerStep& group : routing.layer_steps) {
        union_size += group.union_requests().size();
    }
    EXPECT_EQ(replayed.layer_steps, routing.layer_steps.size());
    EXPECT_EQ(replayed.experts_delivered, union_size);
    const engine::ExpertStats stats = cache->stats();
    EXPECT_EQ(stats.total().experts.selections, union_size);
    EXPECT_EQ(stats.slots.hits + stats.slots.misses, union_size);
    EXPECT_EQ(stats.slots.evictions, 0U);  // a pool of the whole table
}

}  // namespace
}  // namespace cherenkov::testing
