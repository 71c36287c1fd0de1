#include "engine/experts/expert_cache_batch.h"

#include <mutex>

#include "base/error.h"
#include "engine/experts/expert_cache.h"

namespace cherenkov::engine {

ExpertCacheBatch::ExpertCacheBatch(ExpertCache& cache, int64_t layer, size_t n_requests)
    : cache_(cache), layer_(layer), placements_(n_requests) {
    residents_.reserve(n_requests);
    misses_.reserve(n_requests);
}

ExpertCacheBatch::~ExpertCacheBatch() {
    std::lock_guard lock(cache_.mutex_);
    --cache_.live_batches_;
    for (const Item& item : residents_) cache_.unpin(item.slot);
    for (const Item& item : misses_) cache_.unpin(item.slot);
}

void ExpertCacheBatch::add(size_t request_index, uint32_t slot, float weight, bool resident) {
    const Item item{.request_index = request_index, .slot = slot, .weight = weight, .done = false};
    (resident ? residents_ : misses_).push_back(item);
    placements_[request_index] =
        ExpertResidency{.slot = static_cast<int32_t>(slot),
                        .bits = cache_.tables_[static_cast<size_t>(cache_.slots_[slot].table)].bits,
                        .resident = resident};
}

ExpertResidency ExpertCacheBatch::placement(size_t request_index) const {
    return placements_.at(request_index);
}

ExpertWeights ExpertCacheBatch::weights_of(uint32_t slot) const {
    // A pinned slot's table and bytes do not change until the batch releases it.
    const ExpertCache::Table& table =
        cache_.tables_[static_cast<size_t>(cache_.slots_[slot].table)];
    return expert_weights_in_record(cache_.pool_.slot(slot), table.layout);
}

ExpertCacheBatch::Item* ExpertCacheBatch::next_landed_miss(size_t* n_waiting, bool* all_weak) {
    Item* best = nullptr;
    uint64_t best_seq = 0;
    *n_waiting = 0;
    *all_weak = true;
    for (Item& item : misses_) {
        if (item.done) continue;
        const ExpertCache::Slot& slot = cache_.slots_[item.slot];
        if (slot.state == ExpertCache::SlotState::Failed) throw_io(slot.error);
        if (slot.state == ExpertCache::SlotState::Ready) {
            if (best == nullptr || slot.landed_seq < best_seq) {
                best = &item;
                best_seq = slot.landed_seq;
            }
            continue;
        }
        ++*n_waiting;
        if (item.weight >= cache_.options_.cut_weak) *all_weak = false;
    }
    return best;
}

void ExpertCacheBatch::cut_waiting() {
    int table = cache_.resident_table_;
    for (Item& item : misses_) {
        if (item.done) continue;
        item.done = true;
        cut_.push_back(item.request_index);
        const ExpertCache::Slot& slot = cache_.slots_[item.slot];
        table = slot.table;
        ++cache_.stats_.expert(layer_, slot.expert).cuts;
        ++cache_.stats_.layer(layer_).experts.cuts;
        ++cache_.stats_.layer(layer_).quant[static_cast<size_t>(table)].cut_experts;
    }
    ++cache_.stats_.layer(layer_).quant[static_cast<size_t>(table)].cut_batches;
}

bool ExpertCacheBatch::ready() const {
    if (next_resident_ < residents_.size()) return true;
    std::unique_lock lock(cache_.mutex_);
    bool any_waiting = false;
    bool all_weak = true;
    for (const Item& item : misses_) {
        if (item.done) continue;
        const ExpertCache::SlotState state = cache_.slots_[item.slot].state;
        // A landed record is delivered at once, a failed read thrown at once.
        if (state == ExpertCache::SlotState::Ready || state == ExpertCache::SlotState::Failed) {
            return true;
        }
        any_waiting = true;
        if (item.weight >= cache_.options_.cut_weak) all_weak = false;
    }
    // Nothing left, or only weak reads that next() cuts instead of waiting for.
    return !any_waiting || (cache_.options_.cut_weak > 0.0F && all_weak);
}

bool ExpertCacheBatch::next(size_t* request_index, ExpertWeights* weights) {
    if (next_resident_ < residents_.size()) {
        const Item& item = residents_[next_resident_++];
        *request_index = item.request_index;
        *weights = weights_of(item.slot);
        return true;
    }
    std::unique_lock lock(cache_.mutex_);
    while (true) {
        size_t n_waiting = 0;
        bool all_weak = true;
        Item* landed = next_landed_miss(&n_waiting, &all_weak);
        if (landed != nullptr) {
            landed->done = true;
            *request_index = landed->request_index;
            *weights = weights_of(landed->slot);
            return true;
        }
        if (n_waiting == 0) return false;
        if (cache_.options_.cut_weak > 0.0F && all_weak) {
            cut_waiting();
            return false;
        }
        cache_.landed_.wait(lock);
    }
}

}  // namespace cherenkov::engine
