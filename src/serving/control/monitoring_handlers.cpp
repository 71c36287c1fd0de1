#include "serving/control/monitoring_handlers.h"

#include <unistd.h>

#include <algorithm>

#include "base/error.h"

namespace cherenkov::serving::control {
namespace {

using Json = nlohmann::json;

Json prefix_cache_json(const PrefixCacheCounters& c) {
    return {{"hits", c.hits},
            {"misses", c.misses},
            {"cached_tokens", c.cached_tokens},
            {"insertions", c.insertions},
            {"evictions", c.evictions},
            {"expirations", c.expirations},
            {"oversized", c.oversized},
            {"entries", c.entries},
            {"bytes", c.bytes}};
}

Json sessions_json(const SessionCounters& c) {
    return {{"sessions", c.sessions},
            {"busy", c.busy},
            {"bytes", c.bytes},
            {"created", c.created},
            {"deleted", c.deleted},
            {"evicted", c.evicted},
            {"expired", c.expired},
            {"turns_committed", c.turns_committed},
            {"turns_discarded", c.turns_discarded}};
}

Json requests_json(const WorkerCounters& w, const RequestTotals& totals) {
    Json by_outcome = Json::object();
    for (size_t outcome = 0; outcome < kOutcomeNames.size(); ++outcome)
        by_outcome[std::string(kOutcomeNames[outcome])] = totals.requests[outcome];
    Json running = Json::array();
    for (const RunningRequest& r : w.running) {
        running.push_back({{"id", r.id},
                           {"phase", r.phase},
                           {"prompt_tokens", r.prompt_tokens},
                           {"prompt_done", r.prompt_done},
                           {"cached_tokens", r.cached_tokens},
                           {"generated_tokens", r.generated_tokens},
                           {"queued_seconds", r.queued_seconds},
                           {"running_seconds", r.running_seconds},
                           {"session", r.session}});
    }
    return {{"active", w.active},
            {"queued", w.queued},
            {"current", w.current.empty() ? Json(nullptr) : Json(w.current)},
            {"running", std::move(running)},
            {"completed", w.completed},
            {"cancelled", w.cancelled},
            {"failed", w.failed},
            {"rejected", w.rejected},
            {"switches", w.switches},
            {"reserved_bytes", w.reserved_bytes},
            {"prefill_chunk_target_tokens", w.prefill_chunk_tokens},
            {"by_outcome", std::move(by_outcome)},
            {"prompt_tokens", totals.prompt_tokens},
            {"cached_prompt_tokens", totals.cached_prompt_tokens},
            {"generated_tokens", totals.generated_tokens},
            {"prefill_seconds", totals.prefill_seconds},
            {"decode_seconds", totals.decode_seconds}};
}

std::shared_ptr<const engine::EngineStats> latest_or_not_ready(HttpServer& server) {
    std::shared_ptr<const engine::EngineStats> latest = server.stats_board().latest();
    if (!server.ready() || !latest) {
        throw Error(ErrorKind::Busy,
                    "the server is still loading the model; statistics are not "
                    "ready yet");
    }
    return latest;
}

const engine::ExpertStats& expert_stats_or_throw(const engine::EngineStats& stats) {
    if (!stats.experts) {
        throw Error(ErrorKind::Unsupported,
                    "this server's expert source keeps no per-layer counters (no expert cache: "
                    "mapped or direct reads)");
    }
    return *stats.experts;
}

}  // namespace

void add_monitoring_handlers(ControlHandlers& handlers, HttpServer& server,
                             ServerIdentity identity) {
    handlers.status = [&server, identity] {
        const bool ready = server.ready();
        Json out = {
            {"ready", ready},
            {"state", ready ? "ready" : "loading"},
            {"pid", ::getpid()},
            {"model", identity.model},
            {"url", "http://" + identity.host + ":" + std::to_string(server.port()) + "/v1"},
            {"socket", identity.socket_path}};
        const std::shared_ptr<const engine::EngineStats> latest = server.stats_board().latest();
        if (latest) {
            out["observed_at"] = latest->observed_at;
            out["uptime_seconds"] = latest->uptime_seconds;
            out["backend"] = latest->backend;
            out["memory"] = engine::memory_json(*latest);
        }
        if (!ready) return out;
        const WorkerCounters worker = server.counters();
        out["requests"] = requests_json(worker, server.request_totals());
        out["cache"] = prefix_cache_json(worker.prefix_cache);
        out["sessions"] = sessions_json(server.session_counters());
        return out;
    };
    handlers.stats_summary = [&server] {
        const std::shared_ptr<const engine::EngineStats> latest = latest_or_not_ready(server);
        Json out = engine::summary_json(*latest);
        const WorkerCounters worker = server.counters();
        out["requests"] = requests_json(worker, server.request_totals());
        out["requests"].erase("running");
        out["cache"] = prefix_cache_json(worker.prefix_cache);
        out["sessions"] = sessions_json(server.session_counters());
        return out;
    };
    handlers.stats_layers = [&server](const PageRequest& page) {
        const std::shared_ptr<const engine::EngineStats> latest = latest_or_not_ready(server);
        const engine::ExpertStats& experts = expert_stats_or_throw(*latest);
        Json out =
            make_page("layers", static_cast<uint64_t>(experts.n_layers), page, [&](uint64_t layer) {
                Json entry = {{"layer", layer}};
                entry.update(to_json(experts.layers[layer]));
                return entry;
            });
        out["observed_at"] = latest->observed_at;
        out["n_experts"] = experts.n_experts;
        return out;
    };
    handlers.stats_experts = [&server](uint32_t layer, const PageRequest& page) {
        const std::shared_ptr<const engine::EngineStats> latest = latest_or_not_ready(server);
        const engine::ExpertStats& experts = expert_stats_or_throw(*latest);
        if (static_cast<int64_t>(layer) >= experts.n_layers) {
            throw_invalid("layer " + std::to_string(layer) +
                          " is out of range: the expert table has " +
                          std::to_string(experts.n_layers) + " layers (0-" +
                          std::to_string(experts.n_layers - 1) + ")");
        }
        Json out = make_page(
            "experts", static_cast<uint64_t>(experts.n_experts), page, [&](uint64_t expert) {
                Json entry = {{"expert", expert}};
                entry.update(to_json(
                    experts.experts[layer * static_cast<uint64_t>(experts.n_experts) + expert]));
                return entry;
            });
        out["observed_at"] = latest->observed_at;
        out["layer"] = layer;
        return out;
    };
}

}  // namespace cherenkov::serving::control
