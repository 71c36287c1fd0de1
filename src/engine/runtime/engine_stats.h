// One observation of the engine (docs/monitoring.md): memory, expert streaming counters, the
// prefill totals and phase timing, taken together at one instant. It is the single source the
// `memory_stats` line, `bench --json`, the control socket's stats and /metrics all serialise;
// no command keeps counters of its own. LoadedModel::observe() takes one on the engine thread
// (the CUDA figures are the engine thread's); it is a plain value afterwards, safe to copy to
// other threads.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/experts/expert_stats.h"
#include "engine/generate/prefill_counters.h"
#include "engine/model/backend_stats.h"
#include "engine/model/gpu_stage_totals.h"

namespace cherenkov::engine {

// Seed "Phase timing": whether GPU stage coverage is measured, and the samples behind it.
// Fractions are absent without valid samples.
struct GpuTiming {
    std::string status;  // "ok", "unavailable: why", "not applicable: why", "failed: error"
    bool timestamps_available = false;
    uint64_t windows = 0;
    uint64_t invalid_windows = 0;
    std::optional<double> stage_fraction;
    std::optional<double> handoff_gap_fraction;
    double timeline_seconds = 0.0;  // the valid windows' GPU timelines, summed
    double stage_seconds = 0.0;     // their stage (covered) parts
};

// The seed's view of a backend's stage totals: status "ok" while timestamps are recorded,
// "failed: error" once the timer failed, "unavailable: why" for a backend that records none;
// fractions from the valid windows only.
GpuTiming gpu_timing_of(const GpuStageTotals& totals);

struct MemoryFigures {
    uint64_t rss_bytes = 0;
    uint64_t peak_rss_bytes = 0;
    uint64_t dense_bytes = 0;  // resident (non-expert) weights
    uint64_t ngram_mapped_bytes = 0;
    uint64_t state_bytes = 0;  // the sequence state observed with, if any
    uint64_t expert_record_bytes = 0;
    uint64_t expert_pool_bytes = 0;  // the host expert cache (0: none, or mapped)
    bool draft_head = false;
};

struct EngineStats {
    double observed_at = 0.0;     // Unix time of the observation, seconds
    double uptime_seconds = 0.0;  // since the model finished loading
    double load_seconds = 0.0;
    std::string backend;  // "cpu", "cuda"
    // The CPU model's activations in its matmuls: "f32" or "q8" (engine/cpu/matmul.h); with
    // cuda, the --check reference's ("f32").
    std::string cpu_activations = "f32";
    // The CPU matmuls' kernel family: "portable", "avx2" or "avx512" (AVX2 with the int8
    // matmuls on AVX-512 VNNI; engine/cpu/matmul.h).
    std::string cpu_kernels = "portable";
    int expert_bits = 4;
    int64_t prefill_quantum = 0;
    int64_t prefill_chunk_tokens = 0;
    MemoryFigures memory;
    uint64_t experts_read_bytes = 0;     // completed expert-read bytes, every source kind
    std::optional<ExpertStats> experts;  // counters of the expert cache, when there is one
    PrefillTotals prefill;
    GpuTiming gpu_timing;          // decode and MTP calls
    GpuTiming prefill_gpu_timing;  // prefill calls
    // The backend's own figures: the CUDA model's device memory, pool and decode phases (none on
    // the cpu).
    BackendStats backend_stats;
};

// The `memory_stats` object (CLI generation's stderr line, bench --json "memory").
nlohmann::json memory_json(const EngineStats& stats);
// The prefill object: chunks, tokens, min/max_chunk_tokens, seconds.
nlohmann::json prefill_json(const PrefillTotals& prefill);
// {"decode": the host decode phases (CUDA), "gpu_timing": {...}, "gpu_stage_fraction", ...,
// "prefill_gpu": the same coverage figures of the prefill calls}.
nlohmann::json phases_json(const EngineStats& stats);
// The engine part of stats_summary: observation time, uptime, totals, rates since load,
// prefill, phases and memory. Integers stay integers.
nlohmann::json summary_json(const EngineStats& stats);

}  // namespace cherenkov::engine
