// The expert cache's core (slot_table.h) as the device tier drives it: claim() per request, pins
// released per layer, under each replacement policy; and the primitives the host cache uses.
#include "engine/experts/slot_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

constexpr uint64_t kRecords = 16;
constexpr uint64_t kRecordBytes = 1000;

SlotKey q4(uint64_t record) {
    return SlotKey{.record = record, .bits = 4};
}

// One layer's requests as the device pool makes them: claim each record, then release the pins.
void claim_layer(SlotTable& table, const std::vector<uint64_t>& records) {
    std::vector<uint32_t> pinned;
    for (const uint64_t record : records)
        pinned.push_back(table.claim(q4(record), kRecordBytes).slot);
    for (const uint32_t slot : pinned) table.clear_pins(slot);
}

class SlotTableUnderEachPolicy : public ::testing::TestWithParam<ReplacementKind> {};

TEST_P(SlotTableUnderEachPolicy, CountsHitsFillsAndEvictions) {
    SlotTable table(2, kRecords, GetParam());
    EXPECT_EQ(table.policy(), GetParam());
    claim_layer(table, {0});
    claim_layer(table, {1});
    claim_layer(table, {1});
    EXPECT_EQ(table.counters().evictions, 0U);
    claim_layer(table, {2});  // the pool is full: one of 0 and 1 goes
    const TierCounters& counters = table.counters();
    EXPECT_EQ(counters.hits, 1U);
    EXPECT_EQ(counters.misses, 3U);
    EXPECT_EQ(counters.fill_bytes, 3 * kRecordBytes);
    EXPECT_EQ(counters.evictions, 1U);
    EXPECT_DOUBLE_EQ(counters.hit_rate(), 0.25);
    EXPECT_GE(table.find(q4(2)), 0);
    EXPECT_EQ((table.find(q4(0)) >= 0) + (table.find(q4(1)) >= 0), 1);
}

TEST_P(SlotTableUnderEachPolicy, HandsOutFreeSlotsLowestFirst) {
    SlotTable table(3, kRecords, GetParam());
    const SlotTable::Claim a = table.claim(q4(5), kRecordBytes);
    const SlotTable::Claim b = table.claim(q4(9), kRecordBytes);
    EXPECT_EQ(a.slot, 0U);
    EXPECT_EQ(b.slot, 1U);
    EXPECT_FALSE(a.hit);
    EXPECT_FALSE(a.evicted.has_value());
    EXPECT_EQ(table.key_of(1), q4(9));
    EXPECT_FALSE(table.key_of(2).has_value());
}

TEST_P(SlotTableUnderEachPolicy, NeverEvictsPinnedSlots) {
    SlotTable table(3, kRecords, GetParam());
    const uint32_t hot = table.claim(q4(0), kRecordBytes).slot;  // stays pinned throughout
    for (uint64_t record = 1; record < kRecords; ++record) {
        const SlotTable::Claim claim = table.claim(q4(record), kRecordBytes);
        EXPECT_NE(claim.slot, hot);
        table.clear_pins(claim.slot);
    }
    EXPECT_EQ(table.find(q4(0)), static_cast<int32_t>(hot));
    EXPECT_EQ(table.pins(hot), 1U);
    table.unpin(hot);
    EXPECT_EQ(table.pins(hot), 0U);
}

TEST_P(SlotTableUnderEachPolicy, AFullPoolOfPinnedSlotsIsAnError) {
    SlotTable table(2, kRecords, GetParam());
    table.claim(q4(0), kRecordBytes);
    table.claim(q4(1), kRecordBytes);
    try {
        table.claim(q4(2), kRecordBytes);
        FAIL() << "a claim with every slot pinned did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::ResourceExhausted);
        EXPECT_NE(std::string(e.what()).find("all 2 slots are pinned"), std::string::npos)
            << e.what();
    }
    // A hit on a pinned record still works (pinned twice), and nothing was lost.
    const SlotTable::Claim again = table.claim(q4(1), kRecordBytes);
    EXPECT_TRUE(again.hit);
    EXPECT_EQ(table.pins(again.slot), 2U);
    EXPECT_EQ(table.find(q4(2)), -1);
    EXPECT_EQ(table.counters().misses, 2U);
}

TEST_P(SlotTableUnderEachPolicy, KeepsEachPrecisionOfARecordInItsOwnSlot) {
    SlotTable table(3, kRecords, GetParam());
    const SlotTable::Claim high = table.claim(SlotKey{.record = 7, .bits = 4}, kRecordBytes);
    const SlotTable::Claim low = table.claim(SlotKey{.record = 7, .bits = 2}, kRecordBytes / 2);
    EXPECT_FALSE(low.hit);
    EXPECT_NE(high.slot, low.slot);
    EXPECT_EQ(table.find(SlotKey{.record = 7, .bits = 3}), -1);
    EXPECT_EQ(table.counters().fill_bytes, kRecordBytes + kRecordBytes / 2);
    table.clear_pins(high.slot);
    table.clear_pins(low.slot);
    // Evicting the 4-bit copy leaves the 2-bit one.
    table.claim(q4(1), kRecordBytes);
    const SlotTable::Claim third = table.claim(q4(2), kRecordBytes);
    ASSERT_TRUE(third.evicted.has_value());
    EXPECT_EQ(third.evicted->record, 7U);
    EXPECT_EQ(table.find(*third.evicted), -1);
    const int remaining_bits = third.evicted->bits == 4 ? 2 : 4;
    EXPECT_GE(table.find(SlotKey{.record = 7, .bits = remaining_bits}), 0);
}

TEST_P(SlotTableUnderEachPolicy, ClaimHeldCountsNothingOnAMiss) {
    SlotTable table(2, kRecords, GetParam());
    EXPECT_FALSE(table.claim_held(q4(3)).has_value());
    EXPECT_EQ(table.counters().hits + table.counters().misses, 0U);
    table.claim(q4(3), kRecordBytes);
    const std::optional<uint32_t> held = table.claim_held(q4(3));
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(table.pins(*held), 2U);
    EXPECT_EQ(table.counters().hits, 1U);
}

TEST_P(SlotTableUnderEachPolicy, RejectsKeysOutsideTheTable) {
    SlotTable table(2, kRecords, GetParam());
    EXPECT_THROW(table.find(q4(kRecords)), Error);
    EXPECT_THROW(table.find(SlotKey{.record = 0, .bits = 0}), Error);
    EXPECT_THROW(table.find(SlotKey{.record = 0, .bits = SlotTable::kMaxBits + 1}), Error);
    EXPECT_THROW(SlotTable(0, kRecords, GetParam()), Error);
}

std::string policy_name(const ::testing::TestParamInfo<ReplacementKind>& policy) {
    return std::string(replacement_kind_name(policy.param));
}

INSTANTIATE_TEST_SUITE_P(Policies, SlotTableUnderEachPolicy,
                         ::testing::Values(ReplacementKind::Lru, ReplacementKind::Frequency),
                         policy_name);

// A record selected often, then left for a while, against one selected once lately: LRU evicts
// the hot one, frequency keeps it.
std::vector<uint64_t> evicted_by(ReplacementKind policy) {
    SlotTable table(2, kRecords, policy);
    claim_layer(table, {0});  // record 0 is hot
    claim_layer(table, {0});
    claim_layer(table, {0});
    claim_layer(table, {1});  // record 1 is the most recent
    std::vector<uint64_t> evicted;
    const SlotTable::Claim claim = table.claim(q4(2), kRecordBytes);
    if (claim.evicted) evicted.push_back(claim.evicted->record);
    return evicted;
}

TEST(SlotTable, FrequencyKeepsHotRecordsThatLruWouldEvict) {
    EXPECT_EQ(evicted_by(ReplacementKind::Lru), std::vector<uint64_t>{0});
    EXPECT_EQ(evicted_by(ReplacementKind::Frequency), std::vector<uint64_t>{1});
}

// The host cache's path: take a slot, assign it (a pending prefetch), demote stale ones, free
// failed fills; stale prefetches go before ordinary slots, and a filter may protect slots.
TEST(SlotTable, TakeRespectsTheFilterAndStalePrefetchesGoFirst) {
    SlotTable table(3, kRecords, ReplacementKind::Lru);
    for (uint64_t record = 0; record < 3; ++record) {
        const std::optional<SlotTable::Taken> taken = table.take();
        ASSERT_TRUE(taken.has_value());
        table.assign(taken->slot, q4(record), /*pending_prefetch=*/record == 2);
    }
    EXPECT_FALSE(table.take([](uint32_t) { return false; }).has_value());
    table.demote(1);  // a prefetch its layer did not use
    std::optional<SlotTable::Taken> taken = table.take();
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(taken->slot, 1U);
    EXPECT_EQ(taken->evicted, q4(1));
    EXPECT_EQ(table.counters().evictions, 1U);
    table.assign(taken->slot, q4(4));
    // A failed fill: forgotten and freed, not an eviction; the slot is handed out next.
    table.release(taken->slot);
    EXPECT_EQ(table.find(q4(4)), -1);
    EXPECT_EQ(table.counters().evictions, 1U);
    taken = table.take([](uint32_t slot) { return slot != 0; });
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(taken->slot, 1U);
    EXPECT_FALSE(taken->evicted.has_value());
}

}  // namespace
}  // namespace cherenkov::engine
