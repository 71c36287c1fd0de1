// The prefix cache's policy on hand-made checkpoints (only their tokens and sizes matter here):
// the longest usable prefix wins, a whole-prompt hit needs its logits, speculating requests need
// complete MTP state, least recently used entries go first when bytes or entries run out,
// oversized checkpoints are skipped, idle ones expire, and the counters say so.
#include "serving/prefix_cache.h"

#include <gtest/gtest.h>

namespace cherenkov::serving {
namespace {

using Clock = PrefixCache::Clock;

// A checkpoint of `tokens` whose host state carries `payload_floats` floats of residuals.
engine::StateCheckpoint checkpoint(std::vector<int32_t> tokens, size_t payload_floats = 0) {
    engine::StateCheckpoint c;
    c.host.position = static_cast<int64_t>(tokens.size());
    c.host.tokens = std::move(tokens);
    c.host.pending_residuals.assign(payload_floats, 1.0F);
    return c;
}

std::vector<int32_t> iota(int32_t n, int32_t first = 0) {
    std::vector<int32_t> v;
    for (int32_t i = 0; i < n; ++i) v.push_back(first + i);
    return v;
}

TEST(PrefixCache, RestoresTheLongestUsablePrefix) {
    PrefixCache cache(PrefixCacheOptions{});
    const Clock::time_point now = Clock::now();
    EXPECT_EQ(cache.lookup(iota(10), false, now), nullptr);
    cache.insert(checkpoint(iota(4)), {}, true, now);
    cache.insert(checkpoint(iota(8)), {}, false, now);
    cache.insert(checkpoint(iota(6, 100)), {}, true, now);  // another conversation
    const PrefixCache::Entry* hit = cache.lookup(iota(10), false, now);
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->checkpoint.position(), 8);
    // A speculating request needs complete MTP state: the 8-token entry lacks it.
    hit = cache.lookup(iota(10), true, now);
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->checkpoint.position(), 4);
    // A prompt equal to a key needs that entry's logits to choose its first token.
    hit = cache.lookup(iota(8), false, now);
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->checkpoint.position(), 4);
    cache.insert(checkpoint(iota(8)), std::vector<float>(16, 0.5F), false, now);
    hit = cache.lookup(iota(8), false, now);
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->checkpoint.position(), 8);
    EXPECT_EQ(hit->logits.size(), 16U);
    // A shorter prompt than every key, or one that differs at the first token: a miss.
    EXPECT_EQ(cache.lookup(iota(3), false, now), nullptr);
    EXPECT_EQ(cache.lookup(iota(10, 1), false, now), nullptr);

    const PrefixCacheCounters c = cache.counters();
    EXPECT_EQ(c.hits, 4U);
    EXPECT_EQ(c.misses, 3U);
    EXPECT_EQ(c.cached_tokens, 8U + 4 + 4 + 8);
    EXPECT_EQ(c.entries, 3U);  // the second 8-token entry replaced the first
    EXPECT_EQ(c.insertions, 4U);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedByEntriesAndBytes) {
    PrefixCacheOptions options;
    options.max_entries = 2;
    PrefixCache cache(options);
    const Clock::time_point now = Clock::now();
    cache.insert(checkpoint(iota(4)), {}, true, now);
    cache.insert(checkpoint(iota(4, 50)), {}, true, now);
    // Touch the first, so the second is the least recently used.
    ASSERT_NE(cache.lookup(iota(5), false, now), nullptr);
    cache.insert(checkpoint(iota(4, 90)), {}, true, now);
    EXPECT_NE(cache.lookup(iota(5), false, now), nullptr);
    EXPECT_EQ(cache.lookup(iota(5, 50), false, now), nullptr);
    EXPECT_EQ(cache.counters().evictions, 1U);

    // By bytes: room for two 1 MiB checkpoints, not three.
    const uint64_t one = checkpoint(iota(4), 256 * 1024).bytes();
    options.max_entries = 64;
    options.max_bytes = 2 * one + one / 2;
    PrefixCache small(options);
    small.insert(checkpoint(iota(4), 256 * 1024), {}, true, now);
    small.insert(checkpoint(iota(4, 50), 256 * 1024), {}, true, now);
    EXPECT_TRUE(small.covers(iota(4), false, true, now));  // now the most recent
    small.insert(checkpoint(iota(4, 90), 256 * 1024), {}, true, now);
    EXPECT_TRUE(small.covers(iota(4), false, true, now));
    EXPECT_FALSE(small.covers(iota(4, 50), false, false, now));
    EXPECT_TRUE(small.covers(iota(4, 90), false, true, now));
    EXPECT_EQ(small.counters().entries, 2U);
    EXPECT_LE(small.counters().bytes, options.max_bytes);

    // Larger than the whole budget: skipped, nothing evicted for it.
    EXPECT_FALSE(small.fits(one * 3));
    small.insert(checkpoint(iota(4, 200), 3 * 256 * 1024), {}, true, now);
    EXPECT_EQ(small.counters().oversized, 1U);
    EXPECT_EQ(small.counters().entries, 2U);
}

// A state saved by a request that did not speculate lacks the MTP residuals; saved again by one
// that speculates, the entry gains them, and it keeps the logits either one brought.
TEST(PrefixCache, EntriesOfTheSameTokensMergeWhatEachHas) {
    PrefixCache cache(PrefixCacheOptions{});
    const Clock::time_point now = Clock::now();
    cache.insert(checkpoint(iota(8)), std::vector<float>(16, 0.5F), false, now);
    EXPECT_TRUE(cache.covers(iota(8), true, false, now));
    EXPECT_FALSE(cache.covers(iota(8), false, true, now));  // a speculating request needs more
    EXPECT_EQ(cache.lookup(iota(8), true, now), nullptr);
    cache.insert(checkpoint(iota(8), 32), {}, true, now);
    const PrefixCache::Entry* hit = cache.lookup(iota(8), true, now);
    ASSERT_NE(hit, nullptr);
    EXPECT_TRUE(hit->mtp_complete);
    EXPECT_EQ(hit->logits.size(), 16U);
    EXPECT_EQ(hit->checkpoint.host.pending_residuals.size(), 32U);
    // A later incomplete copy does not take the residuals away.
    cache.insert(checkpoint(iota(8)), {}, false, now);
    EXPECT_TRUE(cache.covers(iota(8), true, true, now));
    EXPECT_EQ(cache.counters().entries, 1U);
}

TEST(PrefixCache, IdleEntriesExpireAndHitsRefreshThem) {
    PrefixCacheOptions options;
    options.idle_seconds = 10;
    PrefixCache cache(options);
    const Clock::time_point t0 = Clock::now();
    cache.insert(checkpoint(iota(4)), {}, true, t0);
    cache.insert(checkpoint(iota(4, 50)), {}, true, t0);
    ASSERT_NE(cache.lookup(iota(5), false, t0 + std::chrono::seconds(8)), nullptr);
    cache.expire(t0 + std::chrono::seconds(12));
    EXPECT_EQ(cache.counters().entries, 1U);
    EXPECT_EQ(cache.counters().expirations, 1U);
    EXPECT_NE(cache.lookup(iota(5), false, t0 + std::chrono::seconds(17)), nullptr);
    // Expiry runs before a lookup too.
    EXPECT_EQ(cache.lookup(iota(5), false, t0 + std::chrono::seconds(28)), nullptr);
    EXPECT_EQ(cache.counters().entries, 0U);
    EXPECT_EQ(cache.counters().bytes, 0U);
}

TEST(PrefixCache, OffKeepsNothing) {
    PrefixCacheOptions options;
    options.max_bytes = 0;
    PrefixCache cache(options);
    const Clock::time_point now = Clock::now();
    EXPECT_FALSE(cache.enabled());
    cache.insert(checkpoint(iota(4)), {}, true, now);
    EXPECT_EQ(cache.lookup(iota(5), false, now), nullptr);
    EXPECT_EQ(cache.counters().entries, 0U);
}

}  // namespace
}  // namespace cherenkov::serving
