#include "engine/experts/replacement_policy.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

auto any_slot = [](uint32_t) { return true; };

TEST(ReplacementPolicy, LruEvictsLeastRecentlyUsed) {
    ReplacementPolicy policy(ReplacementKind::Lru, 4, 100, 0.0);
    policy.insert(0, 10, false);
    policy.insert(1, 11, false);
    policy.insert(2, 12, false);
    policy.touch(0);
    EXPECT_EQ(policy.victim(any_slot), 1u);
    EXPECT_EQ(policy.victim([](uint32_t slot) { return slot != 1; }), 2u);
    policy.remove(1);
    EXPECT_FALSE(policy.tracked(1));
    EXPECT_EQ(policy.victim(any_slot), 2u);
    EXPECT_FALSE(policy.victim([](uint32_t) { return false; }).has_value());
}

TEST(ReplacementPolicy, StalePrefetchesGoFirstOldestFirst) {
    ReplacementPolicy policy(ReplacementKind::Lru, 4, 100, 0.0);
    policy.insert(0, 10, false);
    policy.insert(1, 11, false);
    policy.insert(2, 12, false);
    policy.demote(2);  // stale prefetches: 2, then 1
    policy.demote(1);
    EXPECT_EQ(policy.victim(any_slot), 2u);
    policy.touch(2);  // a fetch used it after all: now the most recent ordinary slot
    EXPECT_EQ(policy.victim(any_slot), 1u);
    policy.remove(1);
    EXPECT_EQ(policy.victim(any_slot), 0u);
}

TEST(ReplacementPolicy, PendingPrefetchesGoLast) {
    ReplacementPolicy policy(ReplacementKind::Frequency, 3, 100, 100.0);
    policy.record_selection(10);
    policy.insert(0, 11, true);  // never selected, but its layer is about to be fetched
    policy.insert(1, 10, false);
    EXPECT_EQ(policy.victim(any_slot), 1u);
    policy.demote(0);  // its layer was fetched without it
    EXPECT_EQ(policy.victim(any_slot), 0u);
}

TEST(ReplacementPolicy, FrequencyKeepsOftenSelectedKeys) {
    ReplacementPolicy policy(ReplacementKind::Frequency, 3, 100, 1000.0);
    for (int repeat = 0; repeat < 5; ++repeat) policy.record_selection(10);
    policy.record_selection(11);
    policy.record_selection(12);
    policy.insert(0, 10, false);
    policy.insert(1, 11, false);
    policy.insert(2, 12, false);
    policy.touch(0);
    // 10 was selected most: 11 (fewest selections, least recent) goes first.
    EXPECT_EQ(policy.victim(any_slot), 1u);
    EXPECT_GT(policy.frequency(10), policy.frequency(11));
}

TEST(ReplacementPolicy, FrequencyAgesOldSelections) {
    // Half-life of 2 selections: 10 selections long ago weigh less than 3 recent ones.
    ReplacementPolicy policy(ReplacementKind::Frequency, 2, 100, 2.0);
    for (int repeat = 0; repeat < 10; ++repeat) policy.record_selection(1);
    for (int repeat = 0; repeat < 3; ++repeat) policy.record_selection(2);
    EXPECT_GT(policy.frequency(2), policy.frequency(1));
    policy.insert(0, 1, false);
    policy.insert(1, 2, false);
    EXPECT_EQ(policy.victim(any_slot), 0u);
}

TEST(ReplacementPolicy, FrequencyRescalesWithoutChangingOrder) {
    ReplacementPolicy policy(ReplacementKind::Frequency, 2, 4, 1.0);  // doubles every selection
    policy.record_selection(0);
    policy.insert(0, 0, false);
    policy.record_selection(1);
    policy.record_selection(1);
    policy.insert(1, 1, false);
    for (int repeat = 0; repeat < 600; ++repeat) policy.record_selection(3);  // forces rescales
    EXPECT_EQ(policy.victim(any_slot), 0u);
    EXPECT_GT(policy.frequency(3), policy.frequency(1));
}

TEST(ReplacementPolicy, ParsesKindNames) {
    EXPECT_EQ(parse_replacement_kind("lru"), ReplacementKind::Lru);
    EXPECT_EQ(parse_replacement_kind("frequency"), ReplacementKind::Frequency);
    EXPECT_EQ(replacement_kind_name(ReplacementKind::Frequency), "frequency");
    EXPECT_THROW(parse_replacement_kind("lfu"), Error);
}

}  // namespace
}  // namespace cherenkov::engine
