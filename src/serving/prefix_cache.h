// The prefix cache (seed "Prefix cache", "Memory and scheduling", "Retention"): checkpoints of
// whole sequence states in host RAM, keyed by the exact tokens they processed. A request
// restores the longest checkpoint whose tokens begin its prompt and prefills only the rest.
// Entries are saved at message boundaries, complete prompts and selected prefill chunks (the
// worker decides where), shared by sessions and session-less requests, evicted least recently
// used within byte and count limits, expired when idle, and gone when the server exits.
//
// Only the worker thread uses a PrefixCache (it owns every state); counters() is a copy for the
// statistics. Times are passed in, so tests control the clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "engine/generate/state_checkpoint.h"

namespace cherenkov::serving {

struct PrefixCacheOptions {
    uint64_t max_bytes = uint64_t{512} << 20;  // --prefix-cache-mb; 0 turns the cache off
    int64_t max_entries = 64;                  // --prefix-cache-entries
    double idle_seconds = 1800.0;              // --prefix-cache-idle-seconds; 0: never expire
    // Long prompts are also checkpointed every this many tokens (the "selected prefill chunks"),
    // so prompts that share a long prefix but no message boundary reuse most of it. 0: only
    // message boundaries and complete prompts. --prefix-cache-interval
    int64_t interval_tokens = 1024;

    bool enabled() const { return max_bytes > 0 && max_entries > 0; }
};

// Figures for the statistics (cumulative since start, except entries and bytes).
struct PrefixCacheCounters {
    uint64_t hits = 0;           // lookups that restored a checkpoint
    uint64_t misses = 0;         // lookups that found none
    uint64_t cached_tokens = 0;  // prompt tokens restored instead of prefilled
    uint64_t insertions = 0;
    uint64_t evictions = 0;    // to make room (bytes or entries)
    uint64_t expirations = 0;  // idle past the limit
    uint64_t oversized = 0;    // checkpoints larger than the whole budget, not kept
    uint64_t entries = 0;
    uint64_t bytes = 0;
};

class PrefixCache {
public:
    using Clock = std::chrono::steady_clock;

    struct Entry {
        engine::StateCheckpoint checkpoint;
        // Logits of the last token's row [V]: a checkpoint of a complete prompt keeps them, so an
        // exact hit (a prompt equal to the key) can choose its first token. Empty otherwise.
        std::vector<float> logits;
        // Whether the MTP head can continue from the state (engine::mtp_state_complete): only
        // such entries serve requests that speculate.
        bool mtp_complete = false;
        uint64_t bytes = 0;
        Clock::time_point last_used;
    };

    explicit PrefixCache(PrefixCacheOptions options) : options_(options) {}

    const PrefixCacheOptions& options() const { return options_; }
    bool enabled() const { return options_.enabled(); }

    // The longest entry usable for `prompt`: its tokens begin the prompt (all of it only when it
    // has logits), and it has complete MTP state when `speculating`. Expires idle entries first;
    // a hit becomes the most recently used. The entry stays valid until the next insert() or
    // expire(). Null (a miss) when none fits or the cache is off.
    const Entry* lookup(std::span<const int32_t> prompt, bool speculating, Clock::time_point now);

    // Whether an entry with exactly these tokens serves every request a new checkpoint of them
    // would: it has logits if `with_logits`, complete MTP state if `mtp_complete`. The worker then
    // saves no duplicate (and touching the entry keeps it recent).
    bool covers(std::span<const int32_t> tokens, bool with_logits, bool mtp_complete,
                Clock::time_point now);

    // Whether a checkpoint of `bytes` could be kept at all (not more than the whole budget).
    bool fits(uint64_t bytes) const { return enabled() && bytes <= options_.max_bytes; }

    // Keeps a checkpoint, evicting least recently used entries until the limits hold. One larger
    // than the whole byte budget is not kept (counted as oversized). An entry with the same tokens
    // (the same state, possibly without the MTP residuals or the logits) becomes one entry with
    // the better of both: complete MTP state from whichever has it, logits from whichever has
    // them.
    void insert(engine::StateCheckpoint checkpoint, std::vector<float> logits, bool mtp_complete,
                Clock::time_point now);

    // Drops entries idle longer than the limit.
    void expire(Clock::time_point now);

    PrefixCacheCounters counters() const;

private:
    void evict_until_fits(uint64_t incoming_bytes);
    void erase(std::list<Entry>::iterator it);

    PrefixCacheOptions options_;
    std::list<Entry> entries_;  // most recently used first
    uint64_t bytes_ = 0;
    PrefixCacheCounters counters_;
};

}  // namespace cherenkov::serving
