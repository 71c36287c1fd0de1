#include "engine/runtime/engine_stats.h"

#include <algorithm>

namespace cherenkov::engine {
namespace {

nlohmann::json optional_number(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json memory_json(const EngineStats& stats) {
    const MemoryFigures& m = stats.memory;
    nlohmann::json out;
    out["rss_bytes"] = m.rss_bytes;
    out["peak_rss_bytes"] = m.peak_rss_bytes;
    out["dense_bytes"] = m.dense_bytes;
    out["draft_head"] = m.draft_head;
    out["ngram_mapped_bytes"] = m.ngram_mapped_bytes;
    out["state_bytes"] = m.state_bytes;
    out["expert_bits"] = stats.expert_bits;
    out["expert_record_bytes"] = m.expert_record_bytes;
    out["expert_pool_bytes"] = m.expert_pool_bytes;
    if (stats.experts) out["expert_hit_rate"] = stats.experts->hit_rate();
    out["experts_read_bytes"] = stats.experts_read_bytes;
    out["backend"] = stats.backend;
    out["cpu_activations"] = stats.cpu_activations;
    out["cpu_kernels"] = stats.cpu_kernels;
    out["prefill_quantum"] = stats.prefill_quantum;
    out["prefill_chunk_tokens"] = stats.prefill_chunk_tokens;
    if (nlohmann::json device = backend_stats_json(stats.backend_stats); !device.is_null())
        out["device"] = std::move(device);
    out["uptime_seconds"] = stats.uptime_seconds;
    return out;
}

GpuTiming gpu_timing_of(const GpuStageTotals& totals) {
    GpuTiming gpu;
    gpu.windows = totals.windows;
    gpu.invalid_windows = totals.invalid_windows;
    gpu.timeline_seconds = totals.timeline_seconds;
    gpu.stage_seconds = totals.stage_seconds;
    if (!totals.error.empty()) {
        gpu.status = "failed: " + totals.error;
    } else if (!totals.available) {
        gpu.status = "unavailable: the backend records no GPU stage timestamps";
        return gpu;
    } else {
        gpu.status = "ok";
        gpu.timestamps_available = true;
    }
    if (totals.windows > 0 && totals.timeline_seconds > 0.0) {
        const double stage = std::clamp(totals.stage_fraction(), 0.0, 1.0);
        gpu.stage_fraction = stage;
        gpu.handoff_gap_fraction = 1.0 - stage;
    }
    return gpu;
}

nlohmann::json prefill_json(const PrefillTotals& prefill) {
    return {{"chunks", prefill.chunks},
            {"tokens", prefill.tokens},
            {"min_chunk_tokens", prefill.min_chunk_tokens},
            {"max_chunk_tokens", prefill.max_chunk_tokens},
            {"seconds", prefill.seconds}};
}

nlohmann::json phases_json(const EngineStats& stats) {
    const GpuTiming& gpu = stats.gpu_timing;
    nlohmann::json out;
    out["decode"] = stats.backend_stats.device ? stats.backend_stats.device->decode_phases
                                               : nlohmann::json(nullptr);
    out["gpu_timing"] = {{"status", gpu.status}};
    out["gpu_timestamps_available"] = gpu.timestamps_available;
    out["gpu_windows"] = gpu.windows;
    out["invalid_gpu_windows"] = gpu.invalid_windows;
    out["gpu_stage_fraction"] = optional_number(gpu.stage_fraction);
    out["gpu_handoff_gap_fraction"] = optional_number(gpu.handoff_gap_fraction);
    out["gpu_timeline_seconds"] = gpu.timeline_seconds;
    out["gpu_stage_seconds"] = gpu.stage_seconds;
    const GpuTiming& prefill = stats.prefill_gpu_timing;
    out["prefill_gpu"] = {{"status", prefill.status},
                          {"windows", prefill.windows},
                          {"invalid_windows", prefill.invalid_windows},
                          {"stage_fraction", optional_number(prefill.stage_fraction)},
                          {"handoff_gap_fraction", optional_number(prefill.handoff_gap_fraction)},
                          {"timeline_seconds", prefill.timeline_seconds},
                          {"stage_seconds", prefill.stage_seconds}};
    return out;
}

nlohmann::json summary_json(const EngineStats& stats) {
    nlohmann::json out;
    out["observed_at"] = stats.observed_at;
    out["uptime_seconds"] = stats.uptime_seconds;
    out["load_seconds"] = stats.load_seconds;
    out["backend"] = stats.backend;
    out["expert_bits"] = stats.expert_bits;
    out["experts_read_bytes"] = stats.experts_read_bytes;
    if (stats.experts) {
        const ExpertStats& experts = *stats.experts;
        nlohmann::json totals = to_json(experts.total());
        out["n_layers"] = experts.n_layers;
        out["n_experts"] = experts.n_experts;
        out["steps"] = experts.steps;
        out["hit_rate"] = experts.hit_rate();
        out["totals"] = std::move(totals);
        // Averages since load (seed "Summary rates"); intervals come from differences.
        const LayerCounters sum = experts.total();
        uint64_t completed = 0;
        uint64_t reads = 0;
        for (const PrecisionCounters& q : sum.quant) {
            completed += q.demand.completed_bytes + q.prefetch.completed_bytes;
            reads += q.demand.reads_ok + q.prefetch.reads_ok;
        }
        const double uptime = stats.uptime_seconds > 0 ? stats.uptime_seconds : 1.0;
        out["rates"] = {{"completed_bytes_per_second", static_cast<double>(completed) / uptime},
                        {"reads_per_second", static_cast<double>(reads) / uptime}};
    } else {
        out["totals"] = nullptr;
    }
    out["prefill"] = prefill_json(stats.prefill);
    out["phases"] = phases_json(stats);
    out["memory"] = memory_json(stats);
    return out;
}

}  // namespace cherenkov::engine
