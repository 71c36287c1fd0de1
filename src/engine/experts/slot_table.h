// The expert cache's core, shared by both tiers (host slots in ExpertCache, device slots in
// engine/cuda's DeviceExpertPool): which record at which precision each slot holds, the pins of
// the slots in use, the free slots, the choice of victim (replacement_policy.h, the same policy
// for every tier) and the tier's counters. Bookkeeping only: the tier owns the memory and moves
// the bytes (reads into host slots, copies to the device). Not thread-safe: the owning tier
// serialises its calls.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/experts/expert_stats.h"
#include "engine/experts/replacement_policy.h"

namespace cherenkov::engine {

// A record at one precision: `record` is the table's record index (layer · n_experts + expert),
// `bits` the precision the slot holds it at (a record may be held at several).
struct SlotKey {
    uint64_t record = 0;
    int bits = 0;
    bool operator==(const SlotKey&) const = default;
};

class SlotTable {
public:
    static constexpr int kMaxBits = 8;

    // A slot handed out for a new record; `evicted` is the record it held before, if any.
    struct Taken {
        uint32_t slot = 0;
        std::optional<SlotKey> evicted;
    };
    // One request for a record of a tier that fills slots at once (claim()).
    struct Claim {
        uint32_t slot = 0;
        bool hit = false;                // already held: nothing to fill
        std::optional<SlotKey> evicted;  // miss: the record the slot held before
    };

    // half_life_selections: how many selections halve an older selection's weight (frequency);
    // 0 takes the number of slots. Throws InvalidInput for n_slots 0 or n_records 0.
    SlotTable(uint64_t n_slots, uint64_t n_records, ReplacementKind policy,
              double half_life_selections = 0.0);

    uint64_t n_slots() const { return slots_.size(); }
    uint64_t n_records() const { return n_records_; }
    ReplacementKind policy() const { return policy_.kind(); }

    // The slot holding `key`, or -1. Throws InvalidInput for a key outside the table.
    int32_t find(SlotKey key) const;
    // What `slot` holds; nullopt for a free or discarded slot.
    std::optional<SlotKey> key_of(uint32_t slot) const;

    // A request selected `record` (hit or miss): the frequency policy counts it.
    void record_selection(uint64_t record) { policy_.record_selection(record); }
    // A request used `slot`: most recent, and an ordinary slot again if it was a prefetch.
    void touch(uint32_t slot) { policy_.touch(slot); }
    // `slot` holds a prefetch its layer did not use: evicted before anything else.
    void demote(uint32_t slot) { policy_.demote(slot); }

    // A slot for a new record: a free one (lowest index first), else the policy's victim among
    // unpinned slots for which evictable(slot) holds, whose record is forgotten and counted as an
    // eviction. The slot holds nothing until assign(). nullopt when none can be taken now.
    template <typename Evictable>
    std::optional<Taken> take(Evictable&& evictable) {
        if (!free_.empty()) {
            const uint32_t slot = free_.back();
            free_.pop_back();
            return Taken{.slot = slot, .evicted = std::nullopt};
        }
        const std::optional<uint32_t> victim = policy_.victim(
            [&](uint32_t slot) { return slots_[slot].pins == 0 && evictable(slot); });
        if (!victim) return std::nullopt;
        Taken taken{.slot = *victim, .evicted = key_of(*victim)};
        unmap(*victim);
        ++counters_.evictions;
        return taken;
    }
    std::optional<Taken> take() {
        return take([](uint32_t) { return true; });
    }
    // `slot` (taken) now holds `key`; it is ranked now, so eviction order does not depend on
    // when its bytes arrive. pending_prefetch: filled by lookahead (replacement_policy.h).
    void assign(uint32_t slot, SlotKey key, bool pending_prefetch = false);
    // Forgets what `slot` holds (a failed or cancelled fill) without freeing it or counting an
    // eviction; the caller assigns it again or frees it.
    void unmap(uint32_t slot);
    // Forgets what `slot` holds and returns it to the free slots.
    void release(uint32_t slot);

    // Pins: a pinned slot is never a victim.
    void pin(uint32_t slot) { ++slots_[slot].pins; }
    void unpin(uint32_t slot);
    void clear_pins(uint32_t slot) { slots_[slot].pins = 0; }
    uint32_t pins(uint32_t slot) const { return slots_[slot].pins; }

    // One request of a tier that fills a missing record at once (the device pool): a hit is
    // touched; a miss takes a slot (throwing ResourceExhausted when every slot is pinned) and
    // assigns it, counting fill_bytes; either way the record is selected and its slot pinned.
    Claim claim(SlotKey key, uint64_t fill_bytes);
    // The hit half of claim(): the pinned slot of a held record, or nullopt (nothing counted).
    std::optional<uint32_t> claim_held(SlotKey key);

    // Counting for tiers whose fills complete later (the host cache's reads).
    void count_hit() { ++counters_.hits; }
    void count_miss() { ++counters_.misses; }
    void count_fill(uint64_t bytes) { counters_.fill_bytes += bytes; }
    const TierCounters& counters() const { return counters_; }

private:
    struct Slot {
        int64_t index = -1;  // index_of(key) of the record held, -1: none
        uint32_t pins = 0;
    };

    size_t index_of(SlotKey key) const;
    SlotKey key_at(int64_t index) const;

    uint64_t n_records_ = 0;
    std::vector<Slot> slots_;
    std::vector<int32_t> slot_of_;  // [n_records · (kMaxBits + 1)]: slot holding the key, or -1
    std::vector<uint32_t> free_;    // free slots, the lowest index last
    ReplacementPolicy policy_;
    TierCounters counters_;
};

}  // namespace cherenkov::engine
