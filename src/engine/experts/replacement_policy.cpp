#include "engine/experts/replacement_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

// Rescale the frequency counters before the growing increment loses double precision.
constexpr double kRescaleAbove = 1e150;

}  // namespace

ReplacementKind parse_replacement_kind(std::string_view text) {
    if (text == "lru") return ReplacementKind::Lru;
    if (text == "frequency") return ReplacementKind::Frequency;
    throw_invalid("expert cache policy '" + std::string(text) + "': expected 'lru' or 'frequency'");
}

std::string_view replacement_kind_name(ReplacementKind kind) {
    return kind == ReplacementKind::Lru ? "lru" : "frequency";
}

ReplacementPolicy::ReplacementPolicy(ReplacementKind kind, uint64_t n_slots, uint64_t n_keys,
                                     double half_life_selections)
    : kind_(kind), slots_(n_slots) {
    if (kind_ == ReplacementKind::Frequency) {
        frequency_.assign(n_keys, 0.0);
        growth_ = std::exp2(1.0 / std::max(half_life_selections, 1.0));
    }
}

void ReplacementPolicy::record_selection(uint64_t key) {
    if (kind_ != ReplacementKind::Frequency) return;
    frequency_[key] += increment_;
    increment_ *= growth_;
    if (increment_ > kRescaleAbove) rescale();
}

void ReplacementPolicy::place(uint32_t slot, uint8_t tier) {
    SlotInfo& info = slots_[slot];
    if (info.tracked) order_.erase(info.entry);
    info.entry.tier = tier;
    info.entry.score = kind_ == ReplacementKind::Frequency ? frequency_[info.key] : 0.0;
    info.entry.tick = ++tick_;
    info.entry.slot = slot;
    info.tracked = true;
    order_.insert(info.entry);
}

void ReplacementPolicy::insert(uint32_t slot, uint64_t key, bool pending_prefetch) {
    slots_[slot].key = key;
    place(slot, pending_prefetch ? 2 : 1);
}

void ReplacementPolicy::demote(uint32_t slot) {
    if (!slots_[slot].tracked) return;
    place(slot, 0);
}

void ReplacementPolicy::touch(uint32_t slot) {
    if (!slots_[slot].tracked) return;
    place(slot, 1);
}

void ReplacementPolicy::remove(uint32_t slot) {
    SlotInfo& info = slots_[slot];
    if (!info.tracked) return;
    order_.erase(info.entry);
    info.tracked = false;
}

// Divides every counter and score by the increment: ordering is unchanged.
void ReplacementPolicy::rescale() {
    const double scale = 1.0 / increment_;
    for (double& value : frequency_) value *= scale;
    order_.clear();
    for (SlotInfo& info : slots_) {
        if (!info.tracked) continue;
        info.entry.score *= scale;
        order_.insert(info.entry);
    }
    increment_ = 1.0;
}

}  // namespace cherenkov::engine
