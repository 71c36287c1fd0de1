// WordCache: slot = hash mod kSlots; the stripe mutex is held only to compare and copy a few
// bytes.
#include "text/tokenizer/word_cache.h"

#include <algorithm>

namespace cherenkov::text {

WordCache::WordCache() : slots_(kSlots) {}

bool WordCache::lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
    const size_t slot_index = hash & (kSlots - 1);
    std::lock_guard<std::mutex> lock(stripes_[slot_index % kStripes]);
    const Slot& slot = slots_[slot_index];
    if (slot.word_bytes != word.size() ||
        std::memcmp(slot.word.data(), word.data(), word.size()) != 0) {
        return false;
    }
    out.insert(out.end(), slot.ids.begin(), slot.ids.begin() + slot.n_ids);
    return true;
}

void WordCache::insert(std::string_view word, uint64_t hash, const int32_t* ids,
                       size_t n_ids) const {
    if (word.size() > kMaxWordBytes || n_ids > kMaxIds) return;
    const size_t slot_index = hash & (kSlots - 1);
    std::lock_guard<std::mutex> lock(stripes_[slot_index % kStripes]);
    Slot& slot = slots_[slot_index];
    slot.word_bytes = static_cast<uint8_t>(word.size());
    std::copy(word.begin(), word.end(), slot.word.begin());
    slot.n_ids = static_cast<uint8_t>(n_ids);
    std::copy(ids, ids + n_ids, slot.ids.begin());
}

}  // namespace cherenkov::text
