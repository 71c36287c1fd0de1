// GET /metrics' text (docs/monitoring.md): the exposition format's HELP/TYPE lines, counters,
// labelled gauges and cumulative histograms, from copied figures.
#include "serving/prometheus_metrics.h"

#include <gtest/gtest.h>

namespace cherenkov::serving {
namespace {

bool has_line(const std::string& text, const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(PrometheusMetrics, RendersCountersGaugesAndHistograms) {
    engine::EngineStats engine;
    engine.experts = engine::ExpertStats(2, 4);
    engine.experts->layer(0).experts.selections = 10;
    engine.experts->layer(0).experts.hits = 7;
    engine.experts->layer(1).experts.misses = 3;
    engine.experts_read_bytes = 12345;
    engine.memory.rss_bytes = 1000;
    engine.gpu_timing.timeline_seconds = 0.5;
    engine.gpu_timing.stage_seconds = 0.25;
    RequestMetrics metrics;
    metrics.record({.outcome = RequestOutcome::Length,
                    .prompt_tokens = 5,
                    .cached_tokens = 2,
                    .generated_tokens = 11,
                    .queued_seconds = 0.1,
                    .prefill_seconds = 0.2,
                    .decode_seconds = 1.0});
    metrics.record_rejected();
    MetricsInput input;
    input.ready = true;
    input.engine = &engine;
    input.worker.active = 1;
    input.requests = metrics.totals();
    const std::string text = render_prometheus_metrics(input);

    EXPECT_TRUE(has_line(text, "# TYPE cherenkov_expert_hits_total counter"));
    EXPECT_TRUE(has_line(text, "cherenkov_expert_hits_total 7"));
    EXPECT_TRUE(has_line(text, "cherenkov_expert_misses_total 3"));
    EXPECT_TRUE(has_line(text, "cherenkov_expert_read_bytes_total 12345"));
    EXPECT_TRUE(has_line(text, "cherenkov_memory_bytes{kind=\"rss\"} 1000"));
    EXPECT_TRUE(has_line(text, "cherenkov_requests_total{outcome=\"length\"} 1"));
    EXPECT_TRUE(has_line(text, "cherenkov_requests_total{outcome=\"rejected\"} 1"));
    EXPECT_TRUE(has_line(text, "cherenkov_requests_total{outcome=\"stop\"} 0"));
    EXPECT_TRUE(has_line(text, "cherenkov_generated_tokens_total 11"));
    EXPECT_TRUE(has_line(text, "cherenkov_cached_prompt_tokens_total 2"));
    // TTFT 0.3 s: not in the 0.25 bucket, in every one from 0.5 up (cumulative).
    EXPECT_TRUE(has_line(text, "cherenkov_time_to_first_token_seconds_bucket{le=\"0.25\"} 0"));
    EXPECT_TRUE(has_line(text, "cherenkov_time_to_first_token_seconds_bucket{le=\"0.5\"} 1"));
    EXPECT_TRUE(has_line(text, "cherenkov_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1"));
    EXPECT_TRUE(has_line(text, "cherenkov_time_to_first_token_seconds_count 1"));
    // 10 decoded tokens in one second.
    EXPECT_TRUE(has_line(text, "cherenkov_decode_tokens_per_second_bucket{le=\"10\"} 1"));
    EXPECT_TRUE(has_line(text, "cherenkov_decode_tokens_per_second_bucket{le=\"5\"} 0"));
    EXPECT_TRUE(has_line(text, "cherenkov_requests_running 1"));
    EXPECT_TRUE(has_line(text, "cherenkov_ready 1"));
    EXPECT_TRUE(has_line(text, "# TYPE cherenkov_gpu_stage_seconds_total counter"));
    EXPECT_TRUE(has_line(text, "cherenkov_gpu_timeline_seconds_total 0.5"));
    EXPECT_TRUE(has_line(text, "cherenkov_gpu_stage_seconds_total 0.25"));
}

TEST(PrometheusMetrics, BeforeTheFirstObservationCountersAreZero) {
    const std::string text = render_prometheus_metrics(MetricsInput{});
    EXPECT_TRUE(has_line(text, "cherenkov_expert_hits_total 0"));
    EXPECT_TRUE(has_line(text, "cherenkov_ready 0"));
}

}  // namespace
}  // namespace cherenkov::serving
