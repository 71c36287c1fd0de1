// The pending group of the grouped prefill expert launches (expert_gemm.h): experts join one at a
// time with their (row, slot) lists, each taking the next address-table entry and ⌈n/16⌉ token
// tiles, and one launch takes every expert added since the previous launch. Host bookkeeping
// only (no CUDA), so its rules are tested without a device.
#pragma once

#include <cstdint>
#include <span>

#include "engine/cuda/expert_gemm.h"

namespace cherenkov::engine::cuda {

// Token tiles one call can need: Σ_e ⌈n_e/16⌉ ≤ n_experts + n_pairs/16 for n_pairs (row, slot)
// pairs over n_experts distinct experts.
int64_t max_expert_token_tiles(int64_t n_pairs, int64_t n_experts);

class ExpertGroup {
public:
    // tiles: where the call's token tiles go, each entry written once (the caller's pinned
    // staging, read by asynchronous copies), at least max_expert_token_tiles() entries;
    // capacity: experts per launch (≥ 1, at most the pool slots that can be pinned at once).
    ExpertGroup(std::span<ExpertTokenTile> tiles, int capacity);

    // Whether an expert of `bits` may join now: one launch takes one precision.
    [[nodiscard]] bool accepts(int bits) const { return n_pending_ == 0 || bits == bits_; }
    // Adds the expert whose (row, slot) indices are slots[first, first + n) (accepts(bits) and
    // !full() must hold) and returns its address-table entry; entries count up over the call.
    int32_t add(int bits, int32_t first, int32_t n);
    [[nodiscard]] bool full() const { return n_pending_ >= capacity_; }
    [[nodiscard]] bool empty() const { return n_pending_ == 0; }

    // The pending launch: table entries [first_entry(), n_entries()) and token tiles
    // [first_tile(), n_tiles()) of tiles().
    int32_t first_entry() const { return first_entry_; }
    int32_t n_entries() const { return first_entry_ + n_pending_; }
    int32_t first_tile() const { return first_tile_; }
    int32_t n_tiles() const { return n_tiles_; }
    std::span<const ExpertTokenTile> tiles() const { return tiles_; }

    // The pending experts were launched: the next ones start a new group.
    void launched();

private:
    std::span<ExpertTokenTile> tiles_;
    int capacity_;
    int bits_ = 0;
    int n_pending_ = 0;
    int32_t first_entry_ = 0;
    int32_t first_tile_ = 0;
    int32_t n_tiles_ = 0;
};

}  // namespace cherenkov::engine::cuda
