// Which resident expert slot to evict. Both policies adapt to lookahead in the same way: a slot
// filled by a lookahead read is a pending prefetch until its layer is fetched, and is evicted only
// after every ordinary slot (its layer is about to need it); if the fetch used it, it becomes an
// ordinary slot, otherwise a stale prefetch, evicted before every other slot (oldest first), so
// wrong predictions do not push out the working set.
// Among used slots:
//  - Lru: least recently used first.
//  - Frequency: lowest exponentially aged selection count of its (layer, expert) first, then least
//    recently used. Counts are kept for every record, resident or not, so an expert that returns
//    keeps its history; each selection adds 2^(t / half_life), which ages older selections
//    without touching every counter.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace cherenkov::engine {

enum class ReplacementKind { Lru, Frequency };

// "lru" or "frequency"; throws InvalidInput otherwise.
ReplacementKind parse_replacement_kind(std::string_view text);
std::string_view replacement_kind_name(ReplacementKind kind);

class ReplacementPolicy {
public:
    // n_keys: records in the table (layer · n_experts + expert). half_life_selections: how many
    // selections (over all records) halve the weight of an older selection.
    ReplacementPolicy(ReplacementKind kind, uint64_t n_slots, uint64_t n_keys,
                      double half_life_selections);

    ReplacementKind kind() const { return kind_; }

    // A fetch selected `key` (hit or miss). Updates its frequency.
    void record_selection(uint64_t key);

    // `slot` now holds `key` (most recently used); pending_prefetch: filled by lookahead.
    void insert(uint32_t slot, uint64_t key, bool pending_prefetch);
    // A fetch used `slot`: it becomes the most recent ordinary slot.
    void touch(uint32_t slot);
    // `slot` holds a stale prefetch: it goes before every non-stale slot.
    void demote(uint32_t slot);
    // `slot` leaves the pool (evicted or failed). No-op when it is not tracked.
    void remove(uint32_t slot);
    bool tracked(uint32_t slot) const { return slots_[slot].tracked; }

    // The least valuable tracked slot for which evictable(slot) holds, or nullopt.
    template <typename Evictable>
    std::optional<uint32_t> victim(Evictable&& evictable) const {
        for (const Entry& entry : order_) {
            if (evictable(entry.slot)) return entry.slot;
        }
        return std::nullopt;
    }

    // The key's aged selection count relative to the newest selection (Frequency only; 0 for Lru).
    double frequency(uint64_t key) const {
        return frequency_.empty() ? 0.0 : frequency_[key] / increment_;
    }

private:
    struct Entry {
        uint8_t tier = 0;    // 0: stale prefetch, 1: ordinary, 2: pending prefetch
        double score = 0.0;  // Frequency: the key's aged count; Lru: 0
        uint64_t tick = 0;   // last insert / touch
        uint32_t slot = 0;
        auto operator<=>(const Entry&) const = default;
    };
    struct SlotInfo {
        Entry entry;
        uint64_t key = 0;
        bool tracked = false;
    };

    void place(uint32_t slot, uint8_t tier);
    void rescale();

    ReplacementKind kind_;
    std::vector<SlotInfo> slots_;
    std::vector<double> frequency_;  // per key, in units of the current increment's history
    std::set<Entry> order_;          // least valuable first
    uint64_t tick_ = 0;
    double increment_ = 1.0;
    double growth_ = 1.0;  // 2^(1 / half_life)
};

}  // namespace cherenkov::engine
