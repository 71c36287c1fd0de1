#include "engine/experts/expert_stats.h"

#include <algorithm>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

double ratio(uint64_t numerator, uint64_t denominator) {
    return denominator == 0 ? 0.0
                            : static_cast<double>(numerator) / static_cast<double>(denominator);
}

nlohmann::json read_json(const ReadCounters& reads) {
    return {{"requested_bytes", reads.requested_bytes},
            {"completed_bytes", reads.completed_bytes},
            {"reads_ok", reads.reads_ok},
            {"reads_failed", reads.reads_failed},
            {"read_ns_sum", reads.read_ns_sum},
            {"read_ns_max", reads.read_ns_max}};
}

nlohmann::json expert_json(const ExpertCounters& counters) {
    return {{"selections", counters.selections},
            {"hits", counters.hits},
            {"misses", counters.misses},
            {"prefetches_issued", counters.prefetches_issued},
            {"prefetches_used", counters.prefetches_used},
            {"cuts", counters.cuts}};
}

nlohmann::json layer_json(const LayerCounters& layer) {
    nlohmann::json out = expert_json(layer.experts);
    out["batches"] = layer.batches;
    out["prefetches_dropped"] = layer.prefetches_dropped;
    out["prediction"] = {
        {"fetches", layer.prediction.fetches}, {"predicted", layer.prediction.predicted},
        {"actual", layer.prediction.actual},   {"correct", layer.prediction.correct},
        {"recall", layer.prediction.recall()}, {"precision", layer.prediction.precision()}};
    nlohmann::json quant = nlohmann::json::array();
    for (size_t index = 0; index < kExpertBits.size(); ++index) {
        const PrecisionCounters& counters = layer.quant[index];
        quant.push_back({{"bits", kExpertBits[index]},
                         {"demand", read_json(counters.demand)},
                         {"prefetch", read_json(counters.prefetch)},
                         {"selected_experts", counters.selected_experts},
                         {"eligible_weak_misses", counters.eligible_weak_misses},
                         {"cut_experts", counters.cut_experts},
                         {"cut_batches", counters.cut_batches}});
    }
    out["quant"] = std::move(quant);
    return out;
}

}  // namespace

int precision_index(int bits) {
    switch (bits) {
        case 4: return 0;
        case 3: return 1;
        case 2: return 2;
        default: throw_invalid("expert precision " + std::to_string(bits) + ": expected 4, 3 or 2");
    }
}

void ReadCounters::add(const ReadCounters& other) {
    requested_bytes += other.requested_bytes;
    completed_bytes += other.completed_bytes;
    reads_ok += other.reads_ok;
    reads_failed += other.reads_failed;
    read_ns_sum += other.read_ns_sum;
    read_ns_max = std::max(read_ns_max, other.read_ns_max);
}

void ExpertCounters::add(const ExpertCounters& other) {
    selections += other.selections;
    hits += other.hits;
    misses += other.misses;
    prefetches_issued += other.prefetches_issued;
    prefetches_used += other.prefetches_used;
    cuts += other.cuts;
}

void PrecisionCounters::add(const PrecisionCounters& other) {
    demand.add(other.demand);
    prefetch.add(other.prefetch);
    selected_experts += other.selected_experts;
    eligible_weak_misses += other.eligible_weak_misses;
    cut_experts += other.cut_experts;
    cut_batches += other.cut_batches;
}

double TierCounters::hit_rate() const {
    return ratio(hits, hits + misses);
}

void TierCounters::add(const TierCounters& other) {
    hits += other.hits;
    misses += other.misses;
    fill_bytes += other.fill_bytes;
    evictions += other.evictions;
}

double PredictionCounters::recall() const {
    return ratio(correct, actual);
}
double PredictionCounters::precision() const {
    return ratio(correct, predicted);
}

void PredictionCounters::add(const PredictionCounters& other) {
    fetches += other.fetches;
    predicted += other.predicted;
    actual += other.actual;
    correct += other.correct;
}

ExpertStats::ExpertStats(int64_t n_layers_, int64_t n_experts_)
    : n_layers(n_layers_),
      n_experts(n_experts_),
      layers(static_cast<size_t>(n_layers_)),
      experts(static_cast<size_t>(n_layers_ * n_experts_)) {}

LayerCounters ExpertStats::total() const {
    LayerCounters sum;
    for (const LayerCounters& layer : layers) {
        sum.experts.add(layer.experts);
        sum.prediction.add(layer.prediction);
        for (size_t index = 0; index < sum.quant.size(); ++index) {
            sum.quant[index].add(layer.quant[index]);
        }
        sum.batches += layer.batches;
        sum.prefetches_dropped += layer.prefetches_dropped;
    }
    return sum;
}

double ExpertStats::hit_rate() const {
    const LayerCounters sum = total();
    return ratio(sum.experts.hits, sum.experts.selections);
}

nlohmann::json to_json(const LayerCounters& layer) {
    return layer_json(layer);
}

nlohmann::json to_json(const ExpertCounters& expert) {
    return expert_json(expert);
}

nlohmann::json to_json(const TierCounters& tier) {
    return {{"hits", tier.hits},
            {"misses", tier.misses},
            {"fill_bytes", tier.fill_bytes},
            {"evictions", tier.evictions},
            {"hit_rate", tier.hit_rate()}};
}

nlohmann::json to_json(const ExpertStats& stats, bool include_experts) {
    nlohmann::json out;
    out["steps"] = stats.steps;
    out["n_layers"] = stats.n_layers;
    out["n_experts"] = stats.n_experts;
    out["hit_rate"] = stats.hit_rate();
    out["totals"] = layer_json(stats.total());
    out["slots"] = to_json(stats.slots);
    nlohmann::json layers = nlohmann::json::array();
    for (size_t layer = 0; layer < stats.layers.size(); ++layer) {
        nlohmann::json entry = layer_json(stats.layers[layer]);
        entry["layer"] = layer;
        layers.push_back(std::move(entry));
    }
    out["layers"] = std::move(layers);
    if (!include_experts) return out;
    nlohmann::json experts = nlohmann::json::array();
    for (size_t record = 0; record < stats.experts.size(); ++record) {
        const ExpertCounters& counters = stats.experts[record];
        if (counters.selections == 0 && counters.prefetches_issued == 0) continue;
        nlohmann::json entry = expert_json(counters);
        entry["layer"] = static_cast<int64_t>(record) / stats.n_experts;
        entry["expert"] = static_cast<int64_t>(record) % stats.n_experts;
        experts.push_back(std::move(entry));
    }
    out["experts"] = std::move(experts);
    return out;
}

}  // namespace cherenkov::engine
