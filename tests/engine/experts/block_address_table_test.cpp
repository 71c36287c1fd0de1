#include "engine/experts/block_address_table.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

// The seed's example: a token routed to A/B and a draft routed to B/C, with B missing.
TEST(BlockAddressTable, OrdersResidentFirstThenByMaxWeightWithPerRowWeights) {
    constexpr int32_t kA = 1;
    constexpr int32_t kB = 4;
    constexpr int32_t kC = 6;
    std::vector<ExpertResidency> residency(8);
    residency[kA] = {.slot = 10, .bits = 4, .resident = true};
    residency[kB] = {.slot = 11, .bits = 2, .resident = false};  // missing: read in flight
    residency[kC] = {.slot = 12, .bits = 4, .resident = true};
    const std::vector<RoutedExpert> routes{{kA, 0.3F},
                                           {kB, 0.7F},  // token
                                           {kB, 0.6F},
                                           {kC, 0.4F}};  // draft
    const BlockAddressTable table = build_block_address_table(5, routes, 2, residency);
    EXPECT_EQ(table.layer, 5);
    EXPECT_EQ(table.n_rows, 2);
    ASSERT_EQ(table.entries.size(), 3u);
    EXPECT_EQ(table.n_resident, 2u);
    // Residents C (0.4) then A (0.3); then the missing B despite its larger weight.
    EXPECT_EQ(table.entries[0].expert, kC);
    EXPECT_EQ(table.entries[1].expert, kA);
    EXPECT_EQ(table.entries[2].expert, kB);
    EXPECT_EQ(table.entries[2].slot, 11);
    EXPECT_EQ(table.entries[2].bits, 2);
    EXPECT_FALSE(table.entries[2].resident);
    EXPECT_FLOAT_EQ(table.entries[2].max_weight, 0.7F);
    // Per-row weights, zero where the row did not choose the expert.
    EXPECT_FLOAT_EQ(table.weight(0, 0), 0.0F);
    EXPECT_FLOAT_EQ(table.weight(0, 1), 0.4F);
    EXPECT_FLOAT_EQ(table.weight(1, 0), 0.3F);
    EXPECT_FLOAT_EQ(table.weight(1, 1), 0.0F);
    EXPECT_FLOAT_EQ(table.weight(2, 0), 0.7F);
    EXPECT_FLOAT_EQ(table.weight(2, 1), 0.6F);
}

TEST(BlockAddressTable, BreaksWeightTiesByExpertId) {
    std::vector<ExpertResidency> residency(4);
    const std::vector<RoutedExpert> routes{{3, 0.5F}, {1, 0.5F}, {2, 0.5F}};
    const BlockAddressTable table = build_block_address_table(0, routes, 3, residency);
    ASSERT_EQ(table.entries.size(), 3u);
    EXPECT_EQ(table.entries[0].expert, 1);
    EXPECT_EQ(table.entries[1].expert, 2);
    EXPECT_EQ(table.entries[2].expert, 3);
    EXPECT_EQ(table.n_resident, 0u);
}

TEST(BlockAddressTable, RejectsBadRouting) {
    std::vector<ExpertResidency> residency(4);
    const std::vector<RoutedExpert> outside{{4, 0.5F}};
    EXPECT_THROW(build_block_address_table(0, outside, 1, residency), Error);
    const std::vector<RoutedExpert> twice{{1, 0.5F}, {1, 0.0F}};
    EXPECT_THROW(build_block_address_table(0, twice, 2, residency), Error);
    const std::vector<RoutedExpert> ragged{{1, 0.5F}, {2, 0.5F}, {3, 0.5F}};
    EXPECT_THROW(build_block_address_table(0, ragged, 2, residency), Error);
    // The same expert in two different rows is fine.
    const std::vector<RoutedExpert> shared{{1, 0.5F}, {1, 0.25F}};
    EXPECT_EQ(build_block_address_table(0, shared, 1, residency).entries.size(), 1u);
}

TEST(BlockAddressTable, TagsSlotAddressesWithPrecision) {
    const uint64_t address = 0x7F00'1234'5000;
    EXPECT_EQ(tag_slot_address(address, 4), address);
    EXPECT_EQ(tag_slot_address(address, 3), address | (uint64_t{1} << 63));
    EXPECT_EQ(tag_slot_address(address, 2), address | (uint64_t{1} << 62));
    EXPECT_EQ(tag_slot_address(address, 2) & ~kSlotAddressTagMask, address);
    EXPECT_THROW(tag_slot_address(address, 8), Error);
}

}  // namespace
}  // namespace cherenkov::engine
