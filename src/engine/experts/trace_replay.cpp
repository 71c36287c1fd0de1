#include "engine/experts/trace_replay.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace cherenkov::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

void compute_for(double seconds, ReplayOptions::Compute compute) {
    if (seconds <= 0.0) return;
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    if (compute == ReplayOptions::Compute::Sleep) {
        std::this_thread::sleep_until(until);
        return;
    }
    while (Clock::now() < until) {
    }
}

// Deterministic across platforms (splitmix64), like the synthetic trace generator.
uint64_t next_random(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// The simulated router's guess for `group`: its union with some experts swapped for random ones.
std::vector<int32_t> predict_union(const TraceLayerStep& group, int64_t n_experts, double accuracy,
                                   uint64_t* random) {
    std::vector<int32_t> predicted;
    for (const ExpertRequest& request : group.union_requests()) {
        const double draw = static_cast<double>(next_random(random) >> 11) * 0x1.0p-53;
        int32_t expert = request.expert;
        if (draw >= accuracy) {
            expert = static_cast<int32_t>(next_random(random) % static_cast<uint64_t>(n_experts));
        }
        if (std::find(predicted.begin(), predicted.end(), expert) == predicted.end()) {
            predicted.push_back(expert);
        }
    }
    return predicted;
}

}  // namespace

ReplayResult replay_trace(ExpertSource& source, const RoutingTrace& trace,
                          const ReplayOptions& options) {
    ReplayResult result;
    uint64_t random = options.seed;
    const int64_t n_experts = source.layout().n_experts;
    const auto start = Clock::now();
    int64_t current_step = -1;
    for (size_t index = 0; index < trace.layer_steps.size(); ++index) {
        const TraceLayerStep& group = trace.layer_steps[index];
        if (group.step != current_step) {
            if (current_step >= 0) source.end_step();
            source.begin_step();
            current_step = group.step;
        }
        const bool has_next =
            index + 1 < trace.layer_steps.size() && trace.layer_steps[index + 1].step == group.step;
        if (options.prediction_accuracy >= 0.0 && has_next) {
            const TraceLayerStep& next = trace.layer_steps[index + 1];
            const std::vector<int32_t> predicted =
                predict_union(next, n_experts, options.prediction_accuracy, &random);
            source.predict(next.layer, predicted);
            if (options.after_predict) options.after_predict();
        }
        const std::vector<ExpertRequest> requests = group.union_requests();
        auto stall_start = Clock::now();
        std::unique_ptr<ExpertBatch> batch = source.fetch(group.layer, requests);
        size_t request_index = 0;
        ExpertWeights weights;
        while (batch->next(&request_index, &weights)) {
            result.stall_seconds += seconds_since(stall_start);
            if (options.on_expert) {
                options.on_expert(group.layer, requests[request_index].expert, weights);
            }
            const auto compute_start = Clock::now();
            compute_for(options.compute_seconds_per_expert, options.compute);
            result.compute_seconds += seconds_since(compute_start);
            ++result.experts_delivered;
            stall_start = Clock::now();
        }
        result.stall_seconds += seconds_since(stall_start);
        result.experts_cut += batch->cut_requests().size();
        ++result.layer_steps;
    }
    if (current_step >= 0) source.end_step();
    result.wall_seconds = seconds_since(start);
    return result;
}

}  // namespace cherenkov::engine
