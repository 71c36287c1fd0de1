#include "serving/prometheus_metrics.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace cherenkov::serving {
namespace {

// Prometheus' float syntax: integers print exactly, +Inf for the last bucket.
std::string number(double value) {
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    if (std::isnan(value)) return "NaN";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    return buf;
}

class Exposition {
public:
    void family(const char* name, const char* type, const char* help) {
        text_ +=
            std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    }
    void sample(const std::string& name, uint64_t value, const std::string& labels = "") {
        text_ += name + labels + " " + std::to_string(value) + "\n";
    }
    void sample(const std::string& name, double value, const std::string& labels = "") {
        text_ += name + labels + " " + number(value) + "\n";
    }
    template <size_t N>
    void histogram(const char* name, const char* help, const Histogram<N>& h) {
        family(name, "histogram", help);
        uint64_t cumulative = 0;
        for (size_t bucket = 0; bucket < N; ++bucket) {
            cumulative += h.counts[bucket];
            sample(std::string(name) + "_bucket", cumulative,
                   "{le=\"" + number(h.bounds[bucket]) + "\"}");
        }
        sample(std::string(name) + "_bucket", h.count, "{le=\"+Inf\"}");
        sample(std::string(name) + "_sum", h.sum);
        sample(std::string(name) + "_count", h.count);
    }
    std::string take() { return std::move(text_); }

private:
    std::string text_;
};

}  // namespace

std::string render_prometheus_metrics(const MetricsInput& input) {
    Exposition out;
    const engine::EngineStats* engine = input.engine;

    engine::LayerCounters totals;
    if (engine != nullptr && engine->experts) totals = engine->experts->total();
    out.family("cherenkov_expert_hits_total", "counter",
               "Expert selections served from the cache without a read");
    out.sample("cherenkov_expert_hits_total", totals.experts.hits);
    out.family("cherenkov_expert_misses_total", "counter",
               "Expert selections that had to wait for a read");
    out.sample("cherenkov_expert_misses_total", totals.experts.misses);
    out.family("cherenkov_expert_read_bytes_total", "counter",
               "Bytes of expert records read from the store (completed reads)");
    out.sample("cherenkov_expert_read_bytes_total",
               engine != nullptr ? engine->experts_read_bytes : uint64_t{0});
    out.family("cherenkov_expert_selections_total", "counter", "Expert selections by the router");
    out.sample("cherenkov_expert_selections_total", totals.experts.selections);

    out.family("cherenkov_memory_bytes", "gauge",
               "Memory by kind: rss, peak_rss, dense, expert_pool (host), state_reserved, "
               "device_used, device_expert_pool");
    if (engine != nullptr) {
        const engine::MemoryFigures& m = engine->memory;
        out.sample("cherenkov_memory_bytes", m.rss_bytes, "{kind=\"rss\"}");
        out.sample("cherenkov_memory_bytes", m.peak_rss_bytes, "{kind=\"peak_rss\"}");
        out.sample("cherenkov_memory_bytes", m.dense_bytes, "{kind=\"dense\"}");
        out.sample("cherenkov_memory_bytes", m.expert_pool_bytes, "{kind=\"expert_pool\"}");
        const nlohmann::json& device = engine->device;
        if (device.is_object() && device.contains("device_total_bytes") &&
            device.contains("device_free_bytes")) {
            const uint64_t total = device["device_total_bytes"].get<uint64_t>();
            const uint64_t free = device["device_free_bytes"].get<uint64_t>();
            out.sample("cherenkov_memory_bytes", total > free ? total - free : 0,
                       "{kind=\"device\"}");
        }
        if (device.is_object() && device.contains("device_expert_pool_bytes")) {
            out.sample("cherenkov_memory_bytes", device["device_expert_pool_bytes"].get<uint64_t>(),
                       "{kind=\"device_expert_pool\"}");
        }
    }
    out.sample("cherenkov_memory_bytes", input.worker.reserved_bytes, "{kind=\"state_reserved\"}");

    out.family("cherenkov_requests_total", "counter",
               "Finished requests by outcome (rejected: refused at admission)");
    for (size_t outcome = 0; outcome < kOutcomeNames.size(); ++outcome) {
        out.sample("cherenkov_requests_total", input.requests.requests[outcome],
                   "{outcome=\"" + std::string(kOutcomeNames[outcome]) + "\"}");
    }
    out.family("cherenkov_prompt_tokens_total", "counter", "Prompt tokens of finished requests");
    out.sample("cherenkov_prompt_tokens_total", input.requests.prompt_tokens);
    out.family("cherenkov_cached_prompt_tokens_total", "counter",
               "Prompt tokens restored from the prefix cache instead of prefilled");
    out.sample("cherenkov_cached_prompt_tokens_total", input.requests.cached_prompt_tokens);
    out.family("cherenkov_generated_tokens_total", "counter",
               "Tokens generated by finished requests, failed ones included");
    out.sample("cherenkov_generated_tokens_total", input.requests.generated_tokens);
    out.histogram("cherenkov_time_to_first_token_seconds",
                  "Seconds from submission to the first token (queue and prefill)",
                  input.requests.time_to_first_token);
    out.histogram("cherenkov_decode_tokens_per_second", "Decode rate of each request that decoded",
                  input.requests.decode_tokens_per_second);

    const engine::PrefillTotals prefill =
        engine != nullptr ? engine->prefill : engine::PrefillTotals{};
    out.family("cherenkov_prefill_tokens_total", "counter", "Tokens of completed prefill chunks");
    out.sample("cherenkov_prefill_tokens_total", prefill.tokens);
    out.family("cherenkov_prefill_seconds_total", "counter", "Seconds of completed prefill chunks");
    out.sample("cherenkov_prefill_seconds_total", prefill.seconds);

    out.family("cherenkov_prefix_cache_bytes", "gauge", "Host bytes of prefix checkpoints");
    out.sample("cherenkov_prefix_cache_bytes", input.worker.prefix_cache.bytes);
    out.family("cherenkov_prefix_cache_entries", "gauge", "Prefix checkpoints kept");
    out.sample("cherenkov_prefix_cache_entries", input.worker.prefix_cache.entries);
    out.family("cherenkov_sessions", "gauge", "Sessions kept");
    out.sample("cherenkov_sessions", input.sessions.sessions);
    out.family("cherenkov_session_bytes", "gauge", "Bytes of session history");
    out.sample("cherenkov_session_bytes", input.sessions.bytes);
    out.family("cherenkov_requests_running", "gauge", "Requests admitted and running");
    out.sample("cherenkov_requests_running", static_cast<uint64_t>(input.worker.active));
    out.family("cherenkov_requests_queued", "gauge", "Requests waiting for admission");
    out.sample("cherenkov_requests_queued", static_cast<uint64_t>(input.worker.queued));
    out.family("cherenkov_ready", "gauge", "1 once the model is loaded and requests are served");
    out.sample("cherenkov_ready", uint64_t{input.ready ? 1U : 0U});
    out.family("cherenkov_uptime_seconds", "gauge", "Seconds since the model finished loading");
    out.sample("cherenkov_uptime_seconds", engine != nullptr ? engine->uptime_seconds : 0.0);
    return out.take();
}

}  // namespace cherenkov::serving
