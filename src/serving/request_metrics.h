// Totals over finished requests for /metrics and status (docs/monitoring.md): requests by
// outcome, prompt/cached/generated tokens, and histograms of time to first token and decode
// rate. The worker records each request once, when it sends the final frame; readers take a
// copy. Generated tokens include those of requests that failed part-way (seed "Requests").
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace cherenkov::serving {

// A cumulative histogram in Prometheus' sense: counts[i] are observations <= bounds[i]
// (counts of the last, +Inf, bucket = count).
template <size_t N>
struct Histogram {
    std::array<double, N> bounds{};
    std::array<uint64_t, N + 1> counts{};  // per bucket, not cumulative; [N] is +Inf
    uint64_t count = 0;
    double sum = 0.0;

    void observe(double value) {
        size_t bucket = 0;
        while (bucket < N && value > bounds[bucket]) ++bucket;
        ++counts[bucket];
        ++count;
        sum += value;
    }
};

// Outcomes as OpenAI's finish reasons, plus the failures.
enum class RequestOutcome { Stop, Length, ToolCalls, Cancelled, Error, Rejected };
inline constexpr std::array<std::string_view, 6> kOutcomeNames = {
    "stop", "length", "tool_calls", "cancelled", "error", "rejected"};

struct RequestTotals {
    std::array<uint64_t, kOutcomeNames.size()> requests{};  // by RequestOutcome
    uint64_t prompt_tokens = 0;
    uint64_t cached_prompt_tokens = 0;
    uint64_t generated_tokens = 0;
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
    // Seconds from submission to the first token: queueing plus prefill.
    Histogram<10> time_to_first_token{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
    // Generated tokens per decode second, for requests that decoded.
    Histogram<10> decode_tokens_per_second{{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}};
};

struct FinishedRequest {
    RequestOutcome outcome = RequestOutcome::Stop;
    uint64_t prompt_tokens = 0;
    uint64_t cached_tokens = 0;
    uint64_t generated_tokens = 0;
    double queued_seconds = 0.0;
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
};

class RequestMetrics {
public:
    void record(const FinishedRequest& request);
    void record_rejected();
    RequestTotals totals() const;

private:
    mutable std::mutex mutex_;  // guards totals_
    RequestTotals totals_;
};

// "stop", "length", "tool_calls", "cancelled" from a final frame's finish reason; an error
// frame (empty reason) is Error.
RequestOutcome outcome_of(std::string_view finish_reason, bool failed);

}  // namespace cherenkov::serving
