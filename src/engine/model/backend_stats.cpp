#include "engine/model/backend_stats.h"

namespace cherenkov::engine {
namespace {

// Key names are what bench/suite, bench/cuda_bench.sh, the web page and users' scripts read.
nlohmann::json device_json(const DeviceFigures& d) {
    nlohmann::json out;
    out["device"] = d.name;
    out["device_total_bytes"] = d.total_bytes;
    out["device_free_bytes"] = d.free_bytes;
    out["device_weights_bytes"] = d.weights_bytes;
    out["device_expert_pool_bytes"] = d.expert_pool_bytes;
    out["device_expert_pool"] = d.expert_pool;
    out["host_records_page_locked_bytes"] = d.host_records_page_locked_bytes;
    out["cuda_graphs"] = d.graphs;
    out["cuda_side_streams"] = d.side_streams;
    out["cuda_graph_captures"] = d.graph_captures;
    out["cuda_graph_launches"] = d.graph_launches;
    out["cuda_step_graphs"] = d.step_graphs;
    out["cuda_step_graph_captures"] = d.step_graph_captures;
    out["cuda_step_graph_launches"] = d.step_graph_launches;
    out["device_scratch_bytes"] = d.scratch_bytes;
    out["device_scratch_reserved_bytes"] = d.scratch_reserved_bytes;
    out["prefill_rows_per_call"] = d.prefill_rows_per_call;
    out["device_routing"] = d.routing;
    out["shared_expert_layers_on_expert_kernels"] = d.shared_expert_layers_on_expert_kernels;
    out["device_routed_layers"] = d.routed_layers;
    out["device_routed_calls"] = d.routed_calls;
    out["decode_phases"] = d.decode_phases;
    out["cpu_experts"] = d.cpu_experts;
    out["cpu_experts_computed"] = d.cpu_experts_computed;
    out["cpu_experts_seconds"] = d.cpu_experts_seconds;
    out["cpu_experts_copied"] = d.cpu_experts_copied;
    out["cpu_experts_share"] = d.cpu_experts_share;
    out["cpu_experts_activations"] = d.cpu_experts_activations;
    out["experts_copied_ahead"] = d.experts_copied_ahead;
    out["experts_used_ahead"] = d.experts_used_ahead;
    out["device_expert_hits"] = d.pool.hits;
    out["device_expert_uploads"] = d.pool.uploads;
    out["device_expert_upload_bytes"] = d.pool.upload_bytes;
    out["device_expert_evictions"] = d.pool.evictions;
    out["device_expert_hit_rate"] = d.pool.hit_rate();
    return out;
}

}  // namespace

nlohmann::json backend_stats_json(const BackendStats& stats) {
    if (!stats.device && !stats.check) return nullptr;
    nlohmann::json out = stats.device ? device_json(*stats.device) : nlohmann::json::object();
    if (stats.check) {
        const CheckFigures& c = *stats.check;
        out["check"] = {{"calls", c.calls},
                        {"rows", c.rows},
                        {"argmax_equal", c.argmax_equal},
                        {"max_abs_logit_diff", c.max_abs_logit_diff},
                        {"selected_tokens", c.selected_tokens},
                        {"selected_equal", c.selected_equal}};
    }
    return out;
}

}  // namespace cherenkov::engine
