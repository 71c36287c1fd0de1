// What a backend reports about itself beside the engine's own counters: the CUDA model's device
// memory, device expert pool and graphs, and the --check wrapper's comparison. A typed value the
// backend fills (ModelBackend::backend_stats); backend_stats_json is the one place it becomes the
// `device` object of memory_stats, bench --json and the control socket, under the keys users and
// scripts read (docs/monitoring.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace cherenkov::engine {

// The device expert pool's counters since load.
struct DevicePoolCounters {
    uint64_t hits = 0;
    uint64_t uploads = 0;
    uint64_t upload_bytes = 0;
    uint64_t evictions = 0;

    // hits / (hits + uploads); 0 before any use.
    double hit_rate() const {
        const uint64_t uses = hits + uploads;
        return uses > 0 ? static_cast<double>(hits) / static_cast<double>(uses) : 0.0;
    }
};

// A GPU backend's memory, pool, graphs and routing, observed at one instant.
struct DeviceFigures {
    std::string name;  // the device's name
    uint64_t total_bytes = 0;
    uint64_t free_bytes = 0;
    uint64_t weights_bytes = 0;      // dense weights uploaded
    uint64_t expert_pool_bytes = 0;  // the device expert pool's slots
    std::string expert_pool;         // one line: how the device pool and chunk were sized
    uint64_t host_records_page_locked_bytes = 0;
    bool graphs = false;  // decode segments captured as CUDA graphs
    bool side_streams = false;
    uint64_t graph_captures = 0;
    uint64_t graph_launches = 0;
    bool step_graphs = false;  // whole decode steps as one graph
    uint64_t step_graph_captures = 0;
    uint64_t step_graph_launches = 0;
    uint64_t scratch_bytes = 0;           // the call and layer arenas' capacity
    uint64_t scratch_reserved_bytes = 0;  // what the memory plan kept for a prefill chunk
    int64_t prefill_rows_per_call = 0;
    bool routing = false;  // experts routed on the device when it can
    int64_t shared_expert_layers_on_expert_kernels = 0;
    int64_t routed_layers = 0;  // layers whose every expert is in the device pool
    uint64_t routed_calls = 0;
    // Decode misses of the device pool computed on the CPU instead of copied over (--cpu-experts,
    // engine/cuda/cpu_experts.h): the setting, the experts so computed and their CPU seconds,
    // the misses copied to the device beside them, and the share of misses the split aims at now.
    std::string cpu_experts = "off";
    uint64_t cpu_experts_computed = 0;
    double cpu_experts_seconds = 0.0;
    uint64_t cpu_experts_copied = 0;
    double cpu_experts_share = 0.0;
    std::string cpu_experts_activations = "f32";  // their matmuls' activations: f32 or q8
    // The next layer's predicted experts copied into the pool ahead of its call
    // (--tuning next_layer_copies), and of those the ones it then used.
    uint64_t experts_copied_ahead = 0;
    uint64_t experts_used_ahead = 0;
    // The host decode phases (engine/cuda/decode_phases.h, DecodePhases::to_json), as that
    // struct serialises them.
    nlohmann::json decode_phases;
    DevicePoolCounters pool;
};

// --check: the backend under test against the CPU reference, over every call so far.
struct CheckFigures {
    int64_t calls = 0;
    int64_t rows = 0;
    int64_t argmax_equal = 0;  // rows whose argmax agreed
    double max_abs_logit_diff = 0.0;
    int64_t selected_tokens = 0;  // tokens picked on the backend (token selection)
    int64_t selected_equal = 0;   // of those, equal to the reference's pick
};

struct BackendStats {
    std::optional<DeviceFigures> device{};  // a GPU backend
    std::optional<CheckFigures> check{};    // the --check wrapper
};

// The `device` object: the device's keys (device, device_total_bytes, ..., decode_phases,
// device_expert_hit_rate) and "check"; null when the backend reports neither.
nlohmann::json backend_stats_json(const BackendStats& stats);

}  // namespace cherenkov::engine
