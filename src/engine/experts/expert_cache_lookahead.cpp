// ExpertCache's lookahead half: predict() records the predicted experts of a layer and starts
// background reads for those not in the pool, right away while a batch is live, else once the
// next fetch has queued its own misses; fetch() scores the prediction and drops queued lookahead
// reads its layer did not need.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/experts/expert_cache.h"

namespace cherenkov::engine {

void ExpertCache::predict(int64_t layer, std::span<const int32_t> experts) {
    validate_layer(layer);
    std::lock_guard lock(mutex_);
    LayerLookahead& lookahead = lookahead_[static_cast<size_t>(layer)];
    lookahead.predicted.clear();
    for (const int32_t expert : experts) {
        if (expert < 0 || expert >= layout().n_experts) {
            for (const int32_t seen : lookahead.predicted) marks_[static_cast<size_t>(seen)] = 0;
            lookahead.predicted.clear();
            lookahead.has_prediction = false;
            throw_invalid("predicted expert " + std::to_string(expert) + " outside [0, " +
                          std::to_string(layout().n_experts) + ")");
        }
        uint8_t& mark = marks_[static_cast<size_t>(expert)];
        if ((mark & kMarkSeen) != 0) continue;
        mark |= kMarkSeen;
        lookahead.predicted.push_back(expert);
    }
    for (const int32_t expert : lookahead.predicted) marks_[static_cast<size_t>(expert)] = 0;
    lookahead.has_prediction = true;
    if (!options_.lookahead) return;
    // The seed: lookahead reads start after the current block's required misses. Called between
    // routing a layer and fetching it, the reads wait for that fetch to queue its misses first.
    if (live_batches_ > 0) {
        issue_lookahead(layer);
        return;
    }
    if (std::find(staged_layers_.begin(), staged_layers_.end(), layer) == staged_layers_.end()) {
        staged_layers_.push_back(layer);
    }
}

void ExpertCache::issue_staged_lookahead() {
    for (const int64_t layer : staged_layers_) issue_lookahead(layer);
    staged_layers_.clear();
}

void ExpertCache::issue_lookahead(int64_t layer) {
    LayerLookahead& lookahead = lookahead_[static_cast<size_t>(layer)];
    if (!lookahead.has_prediction) return;  // its fetch came first and consumed it
    for (size_t index = 0; index < lookahead.predicted.size(); ++index) {
        const int32_t expert = lookahead.predicted[index];
        if (find_slot(layer, expert) >= 0) continue;
        const std::optional<uint32_t> slot = take_slot(false, layer);
        if (!slot) {
            // Everything else is pinned, loading or this layer's own prefetches: drop the rest.
            stats_.layer(layer).prefetches_dropped += lookahead.predicted.size() - index;
            break;
        }
        // Earlier predictions first (the engine lists them strongest first).
        const float order_weight = 1.0F / static_cast<float>(index + 1);
        start_read(*slot, resident_table_, layer, expert, ReadPriority::Lookahead, order_weight);
        ++stats_.expert(layer, expert).prefetches_issued;
        ++stats_.layer(layer).experts.prefetches_issued;
        lookahead.read_slots.push_back(*slot);
    }
}

void ExpertCache::record_prediction(int64_t layer, std::span<const ExpertRequest> requests) {
    const LayerLookahead& lookahead = lookahead_[static_cast<size_t>(layer)];
    if (!lookahead.has_prediction) return;
    for (const int32_t expert : lookahead.predicted) {
        marks_[static_cast<size_t>(expert)] |= kMarkPredicted;
    }
    uint64_t correct = 0;
    for (const ExpertRequest& request : requests) {
        if ((marks_[static_cast<size_t>(request.expert)] & kMarkPredicted) != 0) ++correct;
    }
    PredictionCounters& prediction = stats_.layer(layer).prediction;
    ++prediction.fetches;
    prediction.predicted += lookahead.predicted.size();
    prediction.actual += requests.size();
    prediction.correct += correct;
}

void ExpertCache::drop_stale_lookahead(int64_t layer) {
    LayerLookahead& lookahead = lookahead_[static_cast<size_t>(layer)];
    for (const uint32_t slot : lookahead.read_slots) {
        Slot& s = slots_[slot];
        if (!s.speculative || slot_table_.pins(slot) != 0 || s.layer != layer) continue;
        if ((marks_[static_cast<size_t>(s.expert)] & kMarkRequested) != 0) continue;
        if (s.state == SlotState::Loading && io_->cancel(s.job_id)) {
            --reads_pending_;
            ++stats_.layer(layer).prefetches_dropped;
            release_slot(slot);
            continue;
        }
        // Landed (or already reading) and not needed by its layer: a stale prefetch.
        slot_table_.demote(slot);
    }
    lookahead.read_slots.clear();
}

}  // namespace cherenkov::engine
