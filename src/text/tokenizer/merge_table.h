// BPE merge rules keyed by the pair of token ids they join: an open-addressing hash table
// (power-of-two capacity, linear probing, load <= 0.6) so the merge loop does one probe per
// adjacent pair instead of a string lookup. Pairs of ids below 256 (the byte tokens of
// GPT-2-style vocabularies, which every word's first merges join) sit in a direct 512 KiB table.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace cherenkov::text {

struct MergeRule {
    uint32_t rank = 0;   // position in the merges list; lower merges first
    int32_t merged = 0;  // id of the token the pair becomes
};

class MergeTable {
public:
    MergeTable() = default;
    explicit MergeTable(size_t n_rules);

    // Inserts or replaces (a later duplicate of a pair wins, as in Hugging Face's HashMap).
    void insert(int32_t left, int32_t right, MergeRule rule);

    const MergeRule* find(int32_t left, int32_t right) const {
        if (static_cast<uint32_t>(left | right) < kSmallIds && !small_.empty()) {
            const MergeRule& rule =
                small_[static_cast<size_t>(left) * kSmallIds + static_cast<size_t>(right)];
            return rule.rank == kNoRank ? nullptr : &rule;
        }
        if (slots_.empty()) return nullptr;
        const uint64_t key = make_key(left, right);
        size_t slot = hash(key) & mask_;
        while (true) {
            const Slot& entry = slots_[slot];
            if (entry.key == key) return &entry.rule;
            if (entry.key == kEmpty) return nullptr;
            slot = (slot + 1) & mask_;
        }
    }

    size_t size() const { return size_; }

private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static constexpr uint32_t kSmallIds = 256;
    static constexpr uint32_t kNoRank = ~uint32_t{0};

    struct Slot {
        uint64_t key = kEmpty;
        MergeRule rule;
    };

    static uint64_t make_key(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
               static_cast<uint32_t>(right);
    }
    static uint64_t hash(uint64_t key) {
        key ^= key >> 33;
        key *= 0xff51afd7ed558ccdULL;
        key ^= key >> 33;
        return key;
    }

    std::vector<MergeRule> small_;  // kSmallIds x kSmallIds, rank kNoRank when absent
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace cherenkov::text
