// Completed batched-prefill work since load (seed "Prefill chunks"): chunks, tokens, the
// smallest and largest chunk, and the seconds the chunks took. The generator adds each chunk
// it completes; any thread reads the totals. Relaxed atomics: the figures are independent
// counters, so a reader may see one chunk counted in `chunks` and not yet in `tokens`.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

namespace cherenkov::engine {

struct PrefillTotals {
    uint64_t chunks = 0;
    uint64_t tokens = 0;
    uint64_t min_chunk_tokens = 0;  // 0 before the first chunk
    uint64_t max_chunk_tokens = 0;
    double seconds = 0.0;
};

class PrefillCounters {
public:
    void record(uint64_t tokens, double seconds) {
        chunks_.fetch_add(1, std::memory_order_relaxed);
        tokens_.fetch_add(tokens, std::memory_order_relaxed);
        nanoseconds_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
        uint64_t low = min_.load(std::memory_order_relaxed);
        while (tokens < low &&
               !min_.compare_exchange_weak(low, tokens, std::memory_order_relaxed)) {
        }
        uint64_t high = max_.load(std::memory_order_relaxed);
        while (tokens > high &&
               !max_.compare_exchange_weak(high, tokens, std::memory_order_relaxed)) {
        }
    }

    PrefillTotals totals() const {
        PrefillTotals t;
        t.chunks = chunks_.load(std::memory_order_relaxed);
        t.tokens = tokens_.load(std::memory_order_relaxed);
        const uint64_t low = min_.load(std::memory_order_relaxed);
        t.min_chunk_tokens = low == std::numeric_limits<uint64_t>::max() ? 0 : low;
        t.max_chunk_tokens = max_.load(std::memory_order_relaxed);
        t.seconds = static_cast<double>(nanoseconds_.load(std::memory_order_relaxed)) * 1e-9;
        return t;
    }

private:
    std::atomic<uint64_t> chunks_{0};
    std::atomic<uint64_t> tokens_{0};
    std::atomic<uint64_t> nanoseconds_{0};
    std::atomic<uint64_t> min_{std::numeric_limits<uint64_t>::max()};
    std::atomic<uint64_t> max_{0};
};

}  // namespace cherenkov::engine
