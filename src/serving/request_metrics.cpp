#include "serving/request_metrics.h"

namespace cherenkov::serving {

void RequestMetrics::record(const FinishedRequest& request) {
    std::lock_guard lock(mutex_);
    ++totals_.requests[static_cast<size_t>(request.outcome)];
    totals_.prompt_tokens += request.prompt_tokens;
    totals_.cached_prompt_tokens += request.cached_tokens;
    totals_.generated_tokens += request.generated_tokens;
    totals_.prefill_seconds += request.prefill_seconds;
    totals_.decode_seconds += request.decode_seconds;
    if (request.generated_tokens > 0) {
        totals_.time_to_first_token.observe(request.queued_seconds + request.prefill_seconds);
    }
    // The first token comes from the prefill; the rate is over the tokens decode steps made.
    if (request.generated_tokens > 1 && request.decode_seconds > 0) {
        totals_.decode_tokens_per_second.observe(static_cast<double>(request.generated_tokens - 1) /
                                                 request.decode_seconds);
    }
}

void RequestMetrics::record_rejected() {
    std::lock_guard lock(mutex_);
    ++totals_.requests[static_cast<size_t>(RequestOutcome::Rejected)];
}

RequestTotals RequestMetrics::totals() const {
    std::lock_guard lock(mutex_);
    return totals_;
}

RequestOutcome outcome_of(std::string_view finish_reason, bool failed) {
    if (failed) return RequestOutcome::Error;
    if (finish_reason == "length") return RequestOutcome::Length;
    if (finish_reason == "tool_calls") return RequestOutcome::ToolCalls;
    if (finish_reason == "cancelled") return RequestOutcome::Cancelled;
    return RequestOutcome::Stop;
}

}  // namespace cherenkov::serving
