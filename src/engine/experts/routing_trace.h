// Routing traces: which experts each row chose, per step and layer, for replaying the expert
// cache without a model (tests, bench/expert_cache_bench). Text format, one line per
// (step, layer, row), grouped by step then layer; '#' starts a comment line:
//
//     # step layer row expert:weight ...
//     0 0 0 17:0.41 3:0.22 250:0.09
//     0 0 1 17:0.38 9:0.20 4:0.11
//     0 1 0 ...
//
// Steps count forward calls; rows are the token and its drafts. Every line is written by
// write_trace_layer: the backends call it with their routing to record real traces, and
// write_routing_trace with a parsed or synthetic trace.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "engine/experts/block_address_table.h"
#include "engine/experts/expert_source.h"

namespace cherenkov::engine {

// One layer of one step: each row's choices.
struct TraceLayerStep {
    int64_t step = 0;
    int64_t layer = 0;
    std::vector<std::vector<RoutedExpert>> rows;

    // The union of the rows' experts with their max weight, in first-seen order.
    std::vector<ExpertRequest> union_requests() const;
};

struct RoutingTrace {
    int64_t n_layers = 0;                     // 1 + the largest layer seen (or as generated)
    int64_t n_experts = 0;                    // 1 + the largest expert seen (or as generated)
    std::vector<TraceLayerStep> layer_steps;  // step-major, then layer
};

// Throws InvalidInput naming `source_name` and the line for malformed lines.
RoutingTrace parse_routing_trace(std::istream& in, const std::string& source_name);
// The header comment, then every line of `trace`.
void write_routing_trace(std::ostream& out, const RoutingTrace& trace);
// One layer of one step as a backend routed it: a line per row. experts, weights: [n_rows, top_k]
// row-major, each row's choices in routing order (n_rows = experts.size() / top_k).
void write_trace_layer(std::ostream& out, int64_t step, int64_t layer, int64_t top_k,
                       std::span<const int32_t> experts, std::span<const float> weights);

// Synthetic routing with a skewed, drifting popularity per layer: each layer ranks its experts in
// a seeded random order and a row picks rank r with probability ∝ 1 / (r + 1)^zipf_exponent; with
// probability `reuse` a pick instead repeats an expert the layer used in the previous step
// (temporal locality). Weights are descending and sum to 1 per row. Deterministic for a seed on
// every platform (no std:: distributions).
struct SyntheticTraceOptions {
    int64_t n_steps = 64;
    int64_t n_layers = 4;
    int64_t n_experts = 64;
    int64_t top_k = 4;
    int64_t n_rows = 1;
    double zipf_exponent = 0.8;
    double reuse = 0.4;
    uint64_t seed = 1;
};

RoutingTrace make_synthetic_trace(const SyntheticTraceOptions& options);

}  // namespace cherenkov::engine
