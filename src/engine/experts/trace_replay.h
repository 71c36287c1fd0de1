// Drives an ExpertSource with a routing trace the way the engine's MoE does: per step
// begin_step; per layer predict(layer + 1) from a simulated router, fetch(layer) with the union of
// the rows' experts, consume every delivered expert (optionally spinning for a simulated compute
// time each), destroy the batch; end_step. Used by tests and bench/expert_cache_bench.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/experts/expert_source.h"
#include "engine/experts/routing_trace.h"

namespace cherenkov::engine {

struct ReplayOptions {
    // Lookahead: before fetching layer L, predict layer L+1 of the same step from its true union,
    // keeping each expert with this probability and replacing it with a random one otherwise.
    // Negative: never call predict.
    double prediction_accuracy = -1.0;
    double compute_seconds_per_expert = 0.0;  // simulated compute per delivered expert
    // Spin: compute occupies this core (CPU backend). Sleep: the core is free meanwhile (an
    // accelerator computes).
    enum class Compute { Spin, Sleep } compute = Compute::Spin;
    uint64_t seed = 7;
    // Called after each predict(); e.g. to let lookahead reads land before the fetch, so hit
    // rates do not depend on thread timing. May be empty.
    std::function<void()> after_predict;
    // Called with each delivered expert; may be empty. For checking bytes in tests.
    std::function<void(int64_t layer, int32_t expert, const ExpertWeights& weights)> on_expert;
};

struct ReplayResult {
    uint64_t layer_steps = 0;
    uint64_t experts_delivered = 0;
    uint64_t experts_cut = 0;
    double wall_seconds = 0.0;
    double stall_seconds = 0.0;    // blocked in fetch() or next(): read time not hidden
    double compute_seconds = 0.0;  // simulated compute
};

ReplayResult replay_trace(ExpertSource& source, const RoutingTrace& trace,
                          const ReplayOptions& options);

}  // namespace cherenkov::engine
