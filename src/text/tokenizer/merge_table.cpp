// Construction of the merge hash table; lookups are inline in the header.
#include "text/tokenizer/merge_table.h"

#include "base/error.h"

namespace cherenkov::text {

MergeTable::MergeTable(size_t n_rules) {
    // Load factor at most 0.6: short probe runs, and a quarter less memory than 0.5 for the
    // 151k merges of Qwen (4 MiB instead of 8).
    size_t capacity = 16;
    while (capacity * 3 < n_rules * 5 + 3) capacity *= 2;
    slots_.resize(capacity);
    mask_ = capacity - 1;
    small_.assign(size_t{kSmallIds} * kSmallIds, MergeRule{kNoRank, -1});
}

void MergeTable::insert(int32_t left, int32_t right, MergeRule rule) {
    CHERENKOV_ASSERT(size_ + 1 < slots_.size(), "merge table sized for fewer rules");
    if (static_cast<uint32_t>(left | right) < kSmallIds) {
        small_[static_cast<size_t>(left) * kSmallIds + static_cast<size_t>(right)] = rule;
        return;
    }
    const uint64_t key = make_key(left, right);
    size_t slot = hash(key) & mask_;
    while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = (slot + 1) & mask_;
    if (slots_[slot].key == kEmpty) ++size_;
    slots_[slot].key = key;
    slots_[slot].rule = rule;
}

}  // namespace cherenkov::text
