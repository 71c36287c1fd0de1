// One fetch's experts from the expert cache: their slots stay pinned until the batch is
// destroyed. next() hands out the experts that were resident at fetch in request order, then each
// miss in the order its read landed, waiting for reads as needed; with cut_weak it stops early
// when only weak, still-loading experts remain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/experts/block_address_table.h"
#include "engine/experts/expert_source.h"

namespace cherenkov::engine {

class ExpertCache;

class ExpertCacheBatch final : public ExpertBatch {
public:
    ExpertCacheBatch(ExpertCache& cache, int64_t layer, size_t n_requests);
    // Unpins the slots (a failed slot returns to the free list once no batch holds it).
    ~ExpertCacheBatch() override;
    ExpertCacheBatch(const ExpertCacheBatch&) = delete;
    ExpertCacheBatch& operator=(const ExpertCacheBatch&) = delete;

    // Throws Io naming the record (layer, expert, bits, file, offset) when its read failed.
    bool next(size_t* request_index, ExpertWeights* weights) override;
    bool ready() const override;
    std::span<const size_t> cut_requests() const override { return cut_; }

    // The request's slot and precision, and whether it was resident when fetched (block tables).
    ExpertResidency placement(size_t request_index) const;

    // Called by ExpertCache::fetch with the cache lock held; the slot is already pinned.
    void add(size_t request_index, uint32_t slot, float weight, bool resident);

private:
    struct Item {
        size_t request_index = 0;
        uint32_t slot = 0;
        float weight = 0.0F;
        bool done = false;  // delivered or cut
    };

    ExpertWeights weights_of(uint32_t slot) const;
    // With the lock held: the landed miss to deliver next (earliest landing), or nullptr; throws
    // when a miss's read failed. Sets *all_weak when every unlanded miss is below cut_weak.
    Item* next_landed_miss(size_t* n_waiting, bool* all_weak);
    void cut_waiting();

    ExpertCache& cache_;
    int64_t layer_;
    std::vector<Item> residents_;
    std::vector<Item> misses_;
    std::vector<ExpertResidency> placements_;  // [n_requests]
    size_t next_resident_ = 0;
    std::vector<size_t> cut_;
};

}  // namespace cherenkov::engine
