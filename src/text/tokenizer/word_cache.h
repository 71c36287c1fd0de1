// A bounded cache from a pre-tokenized piece to its BPE ids, shared by all threads encoding
// with one tokenizer. Direct-mapped (a new word evicts whatever shared its slot), one cache
// line per slot with the word stored inline, and one mutex per stripe of slots, so it never
// grows, never allocates after construction, and threads rarely wait on each other.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

namespace cherenkov::text {

class WordCache {
public:
    // Words longer than this, or splitting into more ids, are not cached.
    static constexpr size_t kMaxWordBytes = 30;
    static constexpr size_t kMaxIds = 7;

    WordCache();
    WordCache(const WordCache&) = delete;
    WordCache& operator=(const WordCache&) = delete;

    // A hash of `word` for lookup and insert (FNV-1a; words are short).
    static uint64_t hash(std::string_view word) {
        uint64_t value = 0xcbf29ce484222325ULL;
        for (const char byte : word)
            value = (value ^ static_cast<uint8_t>(byte)) * 0x100000001b3ULL;
        return value ^ (value >> 29);
    }

    // Appends the cached ids of `word` to `out` and returns true, or returns false.
    bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
    void insert(std::string_view word, uint64_t hash, const int32_t* ids, size_t n_ids) const;

private:
    static constexpr size_t kSlots = size_t{1} << 15;
    static constexpr size_t kStripes = 64;

    struct alignas(64) Slot {
        uint8_t word_bytes = 0xFF;  // 0xFF: empty
        uint8_t n_ids = 0;
        std::array<char, kMaxWordBytes> word{};
        std::array<int32_t, kMaxIds> ids{};
    };

    // Each mutex guards the slots whose index is congruent to it modulo kStripes.
    mutable std::array<std::mutex, kStripes> stripes_;
    mutable std::vector<Slot> slots_;
};

}  // namespace cherenkov::text
