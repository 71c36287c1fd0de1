// ExpertGroup (expert_group.h): token tiles of kExpertTokenTile (row, slot) indices, the last one
// of an expert partial.
#include "engine/cuda/expert_group.h"

#include <algorithm>

#include "base/error.h"

namespace cherenkov::engine::cuda {

int64_t max_expert_token_tiles(int64_t n_pairs, int64_t n_experts) {
    return n_experts + n_pairs / kExpertTokenTile;
}

ExpertGroup::ExpertGroup(std::span<ExpertTokenTile> tiles, int capacity)
    : tiles_(tiles), capacity_(capacity) {
    CHERENKOV_ASSERT(capacity >= 1, "a group holds at least one expert");
}

int32_t ExpertGroup::add(int bits, int32_t first, int32_t n) {
    CHERENKOV_ASSERT(accepts(bits) && !full() && first >= 0 && n >= 0,
                     "the caller flushes on a precision change and when full");
    const int32_t n_new = (n + kExpertTokenTile - 1) / kExpertTokenTile;
    CHERENKOV_ASSERT(static_cast<size_t>(n_tiles_) + static_cast<size_t>(n_new) <= tiles_.size(),
                     "tiles sized by max_expert_token_tiles");
    const int32_t entry = n_entries();
    for (int32_t done = 0; done < n; done += kExpertTokenTile) {
        tiles_[static_cast<size_t>(n_tiles_++)] =
            ExpertTokenTile{entry, first + done, std::min<int32_t>(kExpertTokenTile, n - done)};
    }
    bits_ = bits;
    ++n_pending_;
    return entry;
}

void ExpertGroup::launched() {
    first_entry_ = n_entries();
    first_tile_ = n_tiles_;
    n_pending_ = 0;
}

}  // namespace cherenkov::engine::cuda
