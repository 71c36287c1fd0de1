#include "serving/prefix_cache.h"

#include <algorithm>

namespace cherenkov::serving {
namespace {

bool begins_with(std::span<const int32_t> prompt, const std::vector<int32_t>& key) {
    return key.size() <= prompt.size() && std::equal(key.begin(), key.end(), prompt.begin());
}

}  // namespace

const PrefixCache::Entry* PrefixCache::lookup(std::span<const int32_t> prompt, bool speculating,
                                              Clock::time_point now) {
    if (!enabled()) return nullptr;
    expire(now);
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const std::vector<int32_t>& key = it->checkpoint.tokens();
        if (key.empty() || !begins_with(prompt, key)) continue;
        if (key.size() == prompt.size() && it->logits.empty()) continue;
        if (speculating && !it->mtp_complete) continue;
        if (best == entries_.end() || key.size() > best->checkpoint.tokens().size()) best = it;
    }
    if (best == entries_.end()) {
        ++counters_.misses;
        return nullptr;
    }
    ++counters_.hits;
    counters_.cached_tokens += best->checkpoint.tokens().size();
    best->last_used = now;
    entries_.splice(entries_.begin(), entries_, best);
    return &entries_.front();
}

bool PrefixCache::covers(std::span<const int32_t> tokens, bool with_logits, bool mtp_complete,
                         Clock::time_point now) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const std::vector<int32_t>& key = it->checkpoint.tokens();
        if (key.size() != tokens.size() || !std::equal(key.begin(), key.end(), tokens.begin())) {
            continue;
        }
        it->last_used = now;
        entries_.splice(entries_.begin(), entries_, it);
        return (it->mtp_complete || !mtp_complete) && (!it->logits.empty() || !with_logits);
    }
    return false;
}

void PrefixCache::insert(engine::StateCheckpoint checkpoint, std::vector<float> logits,
                         bool mtp_complete, Clock::time_point now) {
    if (!enabled()) return;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->checkpoint.tokens() != checkpoint.tokens()) continue;
        // The same tokens, so the same state: keep what each has that the other lacks.
        if (logits.empty()) logits = std::move(it->logits);
        if (it->mtp_complete && !mtp_complete) {
            checkpoint = std::move(it->checkpoint);
            mtp_complete = true;
        }
        erase(it);
        break;
    }
    Entry entry;
    entry.bytes = checkpoint.bytes() + logits.capacity() * sizeof(float);
    if (entry.bytes > options_.max_bytes) {
        ++counters_.oversized;
        return;
    }
    entry.checkpoint = std::move(checkpoint);
    entry.logits = std::move(logits);
    entry.mtp_complete = mtp_complete;
    entry.last_used = now;
    evict_until_fits(entry.bytes);
    bytes_ += entry.bytes;
    entries_.push_front(std::move(entry));
    ++counters_.insertions;
}

void PrefixCache::evict_until_fits(uint64_t incoming_bytes) {
    while (!entries_.empty() &&
           (bytes_ + incoming_bytes > options_.max_bytes ||
            static_cast<int64_t>(entries_.size()) + 1 > options_.max_entries)) {
        erase(std::prev(entries_.end()));
        ++counters_.evictions;
    }
}

void PrefixCache::expire(Clock::time_point now) {
    if (options_.idle_seconds <= 0) return;
    const auto limit = std::chrono::duration<double>(options_.idle_seconds);
    // Least recently used last: expired entries form the tail.
    while (!entries_.empty() && now - entries_.back().last_used > limit) {
        erase(std::prev(entries_.end()));
        ++counters_.expirations;
    }
}

void PrefixCache::erase(std::list<Entry>::iterator it) {
    bytes_ -= it->bytes;
    entries_.erase(it);
}

PrefixCacheCounters PrefixCache::counters() const {
    PrefixCacheCounters c = counters_;
    c.entries = entries_.size();
    c.bytes = bytes_;
    return c;
}

}  // namespace cherenkov::serving
