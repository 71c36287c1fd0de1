// Expert streaming counters (seed "Counter meanings"): per (layer, expert) selections, hits,
// misses, prefetches and cuts; per (layer, precision) reads split into demand and prefetch with
// bytes, counts and durations; per layer lookahead prediction accuracy. A plain copyable value:
// the cache updates its copy under its lock and hands out copies as snapshots.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace cherenkov::engine {

// Index of a precision in per-bits arrays: 4 → 0, 3 → 1, 2 → 2.
inline constexpr std::array<int, 3> kExpertBits = {4, 3, 2};
int precision_index(int bits);

struct ReadCounters {
    uint64_t requested_bytes = 0;
    uint64_t completed_bytes = 0;  // includes the bytes of short reads
    uint64_t reads_ok = 0;
    uint64_t reads_failed = 0;  // errors and short reads
    uint64_t read_ns_sum = 0;   // worker read durations; they overlap across workers
    uint64_t read_ns_max = 0;

    void add(const ReadCounters& other);
};

struct ExpertCounters {
    uint64_t selections = 0;         // requested by a fetch
    uint64_t hits = 0;               // resident and ready at fetch
    uint64_t misses = 0;             // not ready at fetch (read issued, or waiting on lookahead)
    uint64_t prefetches_issued = 0;  // lookahead reads started for it
    uint64_t prefetches_used = 0;    // lookahead-filled slot consumed by a fetch
    uint64_t cuts = 0;               // skipped by cut_weak

    void add(const ExpertCounters& other);
};

struct PrecisionCounters {
    ReadCounters demand;                // reads for fetch misses
    ReadCounters prefetch;              // lookahead reads
    uint64_t selected_experts = 0;      // selections served at this precision
    uint64_t eligible_weak_misses = 0;  // misses below the cut_weak threshold
    uint64_t cut_experts = 0;
    uint64_t cut_batches = 0;

    void add(const PrecisionCounters& other);
};

// One tier of the expert cache (host slots, device slots), counted the same way for each by
// their shared core (slot_table.h): requests that found their record, requests that filled a
// slot (a read into host memory, a copy to the device), the bytes those fills wrote and the fills
// that replaced another record.
struct TierCounters {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t fill_bytes = 0;
    uint64_t evictions = 0;

    double hit_rate() const;  // hits / (hits + misses), 0 without requests
    void add(const TierCounters& other);
};

// Lookahead accuracy over fetches that followed a prediction for their layer.
struct PredictionCounters {
    uint64_t fetches = 0;    // fetches with a prediction
    uint64_t predicted = 0;  // Σ |predicted|
    uint64_t actual = 0;     // Σ |requested|
    uint64_t correct = 0;    // Σ |predicted ∩ requested|

    double recall() const;     // correct / actual: share of needed experts that were predicted
    double precision() const;  // correct / predicted: share of predictions that were needed
    void add(const PredictionCounters& other);
};

struct LayerCounters {
    ExpertCounters experts;  // sum over the layer's experts
    PredictionCounters prediction;
    std::array<PrecisionCounters, 3> quant;  // by precision_index
    uint64_t batches = 0;
    uint64_t prefetches_dropped = 0;  // queued lookahead reads cancelled before they started
};

struct ExpertStats {
    int64_t n_layers = 0;
    int64_t n_experts = 0;
    uint64_t steps = 0;
    std::vector<LayerCounters> layers;    // [n_layers]
    std::vector<ExpertCounters> experts;  // [n_layers · n_experts], record order
    TierCounters slots;                   // the host slots as a tier (fills: completed reads)

    ExpertStats() = default;
    ExpertStats(int64_t n_layers_, int64_t n_experts_);

    ExpertCounters& expert(int64_t layer, int64_t expert_id) {
        return experts[static_cast<size_t>(layer * n_experts + expert_id)];
    }
    LayerCounters& layer(int64_t layer_id) { return layers[static_cast<size_t>(layer_id)]; }

    LayerCounters total() const;  // sum over layers
    double hit_rate() const;      // hits / selections, 0 without selections
};

// {"steps", "totals": {...}, "layers": [{"layer", "selections", ..., "prediction": {...},
//  "quant": [{"bits", "demand": {...}, "prefetch": {...}, ...}]}], "experts": [...] }.
// Per-expert entries (only those ever selected or prefetched) when include_experts.
nlohmann::json to_json(const ExpertStats& stats, bool include_experts = false);
// One layer's entry of to_json's "layers" (without its "layer" index), and one expert's.
nlohmann::json to_json(const LayerCounters& layer);
nlohmann::json to_json(const ExpertCounters& expert);
// {"hits", "misses", "fill_bytes", "evictions", "hit_rate"}.
nlohmann::json to_json(const TierCounters& tier);

}  // namespace cherenkov::engine
