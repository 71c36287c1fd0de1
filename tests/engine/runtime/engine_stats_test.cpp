// EngineStats (docs/monitoring.md): one observation that memory_stats, bench --json and the
// control socket all serialise. Prefill chunks a generation completes land in the model's
// totals; the expert cache's counters come with the observation; the memory_stats keys stay.
#include "engine/runtime/engine_stats.h"

#include <gtest/gtest.h>

#include "engine/generate/generator.h"
#include "engine/runtime/loaded_model.h"
#include "store/prepare.h"
#include "support/temp_dir.h"

namespace cherenkov::engine {
namespace {

std::unique_ptr<LoadedModel> load_tiny(const testing::TempDir& temp, const std::string& pool) {
    store::PrepareOptions prepare;
    prepare.source_dir = std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/tiny_a/hf_flat_fused";
    prepare.output_dir = temp.file("store");
    prepare.n_threads = 2;
    store::prepare_store(prepare);
    LoadOptions options;
    options.store_dir = prepare.output_dir;
    options.backend = "cpu";
    options.threads = 1;
    options.pool = parse_pool_setting(pool);
    return LoadedModel::load(options);
}

TEST(PrefillCounters, TracksChunksTokensAndExtremes) {
    PrefillCounters counters;
    EXPECT_EQ(counters.totals().min_chunk_tokens, 0U);
    counters.record(7, 0.5);
    counters.record(3, 0.25);
    counters.record(9, 0.25);
    const PrefillTotals totals = counters.totals();
    EXPECT_EQ(totals.chunks, 3U);
    EXPECT_EQ(totals.tokens, 19U);
    EXPECT_EQ(totals.min_chunk_tokens, 3U);
    EXPECT_EQ(totals.max_chunk_tokens, 9U);
    EXPECT_NEAR(totals.seconds, 1.0, 1e-6);
}

TEST(EngineStats, GenerationPrefillAndExpertCountersShareOneObservation) {
    testing::TempDir temp;
    const std::unique_ptr<LoadedModel> loaded = load_tiny(temp, "1");
    GenerationOptions options;
    options.max_tokens = 3;
    options.drafts = 0;
    options.prefill_quantum = PrefillQuantum::of(4);
    options.prefill_counters = &loaded->prefill_counters();
    Generator generator(loaded->model(), options);
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const GenerationStats run = generator.generate(prompt, [](int32_t) { return true; });

    const EngineStats stats = loaded->observe(nullptr);
    EXPECT_EQ(stats.prefill.chunks, static_cast<uint64_t>(run.prefill_chunks));
    EXPECT_EQ(stats.prefill.tokens, prompt.size());
    EXPECT_EQ(stats.prefill.max_chunk_tokens, 4U);
    EXPECT_EQ(stats.prefill.min_chunk_tokens, 2U);
    ASSERT_TRUE(stats.experts.has_value());
    const LayerCounters total = stats.experts->total();
    EXPECT_GT(total.experts.selections, 0U);
    EXPECT_EQ(total.experts.selections, total.experts.hits + total.experts.misses);
    EXPECT_GT(stats.observed_at, 1.6e9);
    EXPECT_GE(stats.uptime_seconds, 0.0);
    EXPECT_EQ(stats.gpu_timing.status.rfind("not applicable", 0), 0U);
    EXPECT_EQ(stats.prefill_gpu_timing.status, stats.gpu_timing.status);

    // memory_stats is this observation's memory object, with the keys bench reports read.
    const nlohmann::json memory = loaded->memory_stats(nullptr);
    for (const char* key :
         {"rss_bytes", "peak_rss_bytes", "dense_bytes", "draft_head", "ngram_mapped_bytes",
          "state_bytes", "expert_bits", "expert_record_bytes", "expert_pool_bytes",
          "expert_hit_rate", "experts_read_bytes", "backend", "cpu_activations", "cpu_kernels", "prefill_quantum",
          "prefill_chunk_tokens", "uptime_seconds"}) {
        EXPECT_TRUE(memory.contains(key)) << key;
    }
    EXPECT_EQ(memory["experts_read_bytes"].get<uint64_t>(), stats.experts_read_bytes);

    const nlohmann::json summary = summary_json(stats);
    EXPECT_TRUE(summary["totals"]["selections"].is_number_unsigned());
    EXPECT_EQ(summary["prefill"]["chunks"].get<uint64_t>(), stats.prefill.chunks);
    EXPECT_TRUE(summary["phases"]["gpu_stage_fraction"].is_null());
    EXPECT_FALSE(summary["phases"]["gpu_timestamps_available"].get<bool>());
    // The prefill calls' coverage beside the decode calls'.
    const nlohmann::json& prefill = summary["phases"]["prefill_gpu"];
    EXPECT_EQ(prefill["status"].get<std::string>(), stats.gpu_timing.status);
    EXPECT_EQ(prefill["windows"].get<uint64_t>(), 0U);
    EXPECT_TRUE(prefill["stage_fraction"].is_null());
}

TEST(EngineStats, WithoutACacheThereAreNoExpertCounters) {
    testing::TempDir temp;
    const std::unique_ptr<LoadedModel> loaded = load_tiny(temp, "0");
    const EngineStats stats = loaded->observe(nullptr);
    EXPECT_FALSE(stats.experts.has_value());
    EXPECT_TRUE(summary_json(stats)["totals"].is_null());
    EXPECT_FALSE(memory_json(stats).contains("expert_hit_rate"));
}

}  // namespace
}  // namespace cherenkov::engine

namespace cherenkov::engine {
namespace {

// The calls between two readings (cherenkov bench's per-run prefill coverage).
TEST(GpuStageTotals, DifferenceIsTheCallsBetweenTwoReadings) {
    GpuStageTotals earlier;
    earlier.available = true;
    earlier.windows = 2;
    earlier.invalid_windows = 1;
    earlier.timeline_seconds = 2.5;
    earlier.stage_seconds = 0.5;
    GpuStageTotals later = earlier;
    later.windows = 3;
    later.timeline_seconds = 2.52;
    later.stage_seconds = 0.518;
    const GpuStageTotals run = later - earlier;
    EXPECT_TRUE(run.available);
    EXPECT_EQ(run.windows, 1U);
    EXPECT_EQ(run.invalid_windows, 0U);
    EXPECT_NEAR(run.timeline_seconds, 0.02, 1e-12);
    EXPECT_NEAR(run.stage_fraction(), 0.9, 1e-9);
    // Nothing measured in between: no fraction.
    EXPECT_LT((earlier - earlier).stage_fraction(), 0.0);
}

TEST(GpuTimingOf, StatusAndFractionsFollowTheBackendsTotals) {
    const GpuTiming none = gpu_timing_of(GpuStageTotals{});
    EXPECT_EQ(none.status.rfind("unavailable", 0), 0U);
    EXPECT_FALSE(none.timestamps_available);
    EXPECT_FALSE(none.stage_fraction.has_value());

    GpuStageTotals totals;
    totals.available = true;
    const GpuTiming waiting = gpu_timing_of(totals);  // timing, nothing measured yet
    EXPECT_EQ(waiting.status, "ok");
    EXPECT_TRUE(waiting.timestamps_available);
    EXPECT_FALSE(waiting.stage_fraction.has_value());
    EXPECT_FALSE(waiting.handoff_gap_fraction.has_value());

    totals.windows = 4;
    totals.invalid_windows = 1;
    totals.timeline_seconds = 0.004;
    totals.stage_seconds = 0.003;
    const GpuTiming ok = gpu_timing_of(totals);
    EXPECT_EQ(ok.windows, 4U);
    EXPECT_EQ(ok.invalid_windows, 1U);
    EXPECT_DOUBLE_EQ(*ok.stage_fraction, 0.75);
    EXPECT_DOUBLE_EQ(*ok.handoff_gap_fraction, 0.25);

    totals.available = false;
    totals.error = "cudaEventRecord: an illegal memory access was encountered";
    const GpuTiming failed = gpu_timing_of(totals);
    EXPECT_EQ(failed.status, "failed: " + totals.error);
    EXPECT_FALSE(failed.timestamps_available);
    EXPECT_DOUBLE_EQ(*failed.stage_fraction, 0.75);  // what was measured before the failure
}

}  // namespace
}  // namespace cherenkov::engine
