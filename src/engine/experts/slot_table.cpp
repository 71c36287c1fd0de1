#include "engine/experts/slot_table.h"

#include <string>

#include "base/error.h"

namespace cherenkov::engine {

SlotTable::SlotTable(uint64_t n_slots, uint64_t n_records, ReplacementKind policy,
                     double half_life_selections)
    : n_records_(n_records),
      slots_(n_slots),
      policy_(policy, n_slots, n_records,
              half_life_selections > 0.0 ? half_life_selections : static_cast<double>(n_slots)) {
    if (n_slots == 0 || n_slots > (uint64_t{1} << 31)) {
        throw_invalid("expert slots: " + std::to_string(n_slots) +
                      " slots (expected at least 1 and below 2^31)");
    }
    if (n_records == 0) throw_invalid("expert slots: a table without records");
    slot_of_.assign(n_records * (kMaxBits + 1), -1);
    free_.reserve(n_slots);
    for (uint64_t slot = n_slots; slot > 0; --slot)
        free_.push_back(static_cast<uint32_t>(slot - 1));
}

size_t SlotTable::index_of(SlotKey key) const {
    if (key.record >= n_records_ || key.bits < 1 || key.bits > kMaxBits) {
        throw_invalid("expert slots: no record " + std::to_string(key.record) + " at " +
                      std::to_string(key.bits) + " bits in a table of " +
                      std::to_string(n_records_) + " records");
    }
    return static_cast<size_t>(key.record * (kMaxBits + 1) + static_cast<uint64_t>(key.bits));
}

SlotKey SlotTable::key_at(int64_t index) const {
    const auto at = static_cast<uint64_t>(index);
    return SlotKey{.record = at / (kMaxBits + 1), .bits = static_cast<int>(at % (kMaxBits + 1))};
}

int32_t SlotTable::find(SlotKey key) const {
    return slot_of_[index_of(key)];
}

std::optional<SlotKey> SlotTable::key_of(uint32_t slot) const {
    const int64_t index = slots_[slot].index;
    if (index < 0) return std::nullopt;
    return key_at(index);
}

void SlotTable::assign(uint32_t slot, SlotKey key, bool pending_prefetch) {
    const size_t index = index_of(key);
    CHERENKOV_ASSERT(slots_[slot].index < 0 && slot_of_[index] < 0,
                     "a taken slot and a record not held elsewhere");
    slots_[slot].index = static_cast<int64_t>(index);
    slot_of_[index] = static_cast<int32_t>(slot);
    policy_.insert(slot, key.record, pending_prefetch);
}

void SlotTable::unmap(uint32_t slot) {
    Slot& s = slots_[slot];
    if (s.index >= 0) slot_of_[static_cast<size_t>(s.index)] = -1;
    s.index = -1;
    policy_.remove(slot);
}

void SlotTable::release(uint32_t slot) {
    unmap(slot);
    slots_[slot].pins = 0;
    free_.push_back(slot);
}

void SlotTable::unpin(uint32_t slot) {
    CHERENKOV_ASSERT(slots_[slot].pins > 0, "unpin of a pinned slot");
    --slots_[slot].pins;
}

SlotTable::Claim SlotTable::claim(SlotKey key, uint64_t fill_bytes) {
    if (const std::optional<uint32_t> held = claim_held(key)) {
        return Claim{.slot = *held, .hit = true, .evicted = std::nullopt};
    }
    record_selection(key.record);
    const std::optional<Taken> taken = take();
    if (!taken) {
        throw Error(ErrorKind::ResourceExhausted,
                    "expert slots: all " + std::to_string(slots_.size()) +
                        " slots are pinned (record " + std::to_string(key.record) + " at " +
                        std::to_string(key.bits) + " bits needs one)");
    }
    assign(taken->slot, key);
    pin(taken->slot);
    ++counters_.misses;
    counters_.fill_bytes += fill_bytes;
    return Claim{.slot = taken->slot, .hit = false, .evicted = taken->evicted};
}

std::optional<uint32_t> SlotTable::claim_held(SlotKey key) {
    const int32_t found = find(key);
    if (found < 0) return std::nullopt;
    const auto slot = static_cast<uint32_t>(found);
    record_selection(key.record);
    touch(slot);
    pin(slot);
    ++counters_.hits;
    return slot;
}

}  // namespace cherenkov::engine
