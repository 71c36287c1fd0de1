// ExpertGroup (engine/cuda/expert_group.h), the host bookkeeping of the grouped prefill expert
// launches: token tiles of 16 with a partial last one, table entries counting up over the call,
// flushes on a precision change and when full. No device needed.
#include "engine/cuda/expert_group.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"

namespace cherenkov::engine::cuda {
namespace {

TEST(CudaExpertGroup, CutsEachExpertIntoTilesOfSixteenWithAPartialLastOne) {
    const int32_t counts[] = {1, 3, 8, 17, 40, 16, 32};
    int64_t n_pairs = 0;
    for (const int32_t n : counts) n_pairs += n;
    std::vector<ExpertTokenTile> storage(
        static_cast<size_t>(max_expert_token_tiles(n_pairs, std::size(counts))));
    ExpertGroup group(storage, 100);
    int32_t first = 0;
    int32_t next_entry = 0;
    for (const int32_t n : counts) {
        EXPECT_EQ(group.add(4, first, n), next_entry++);
        first += n;
    }
    // 1 | 3 | 8 | 16 + 1 | 16 + 16 + 8 | 16 | 16 + 16
    const std::vector<std::vector<int32_t>> expected = {{1},         {3},  {8},     {16, 1},
                                                        {16, 16, 8}, {16}, {16, 16}};
    ASSERT_EQ(group.n_tiles(), 11);
    ASSERT_LE(static_cast<size_t>(group.n_tiles()), storage.size());
    size_t tile = 0;
    first = 0;
    for (size_t entry = 0; entry < expected.size(); ++entry) {
        for (const int32_t count : expected[entry]) {
            const ExpertTokenTile& t = group.tiles()[tile++];
            EXPECT_EQ(t.expert, static_cast<int32_t>(entry));
            EXPECT_EQ(t.first, first);
            EXPECT_EQ(t.count, count);
            first += count;
        }
    }
    EXPECT_EQ(group.first_entry(), 0);
    EXPECT_EQ(group.n_entries(), 7);
}

TEST(CudaExpertGroup, AcceptsOnlyThePendingPrecisionUntilLaunched) {
    std::vector<ExpertTokenTile> storage(8);
    ExpertGroup group(storage, 4);
    EXPECT_TRUE(group.empty());
    EXPECT_TRUE(group.accepts(2));
    group.add(4, 0, 5);
    EXPECT_TRUE(group.accepts(4));
    EXPECT_FALSE(group.accepts(2));
    EXPECT_FALSE(group.accepts(8));
    EXPECT_THROW(group.add(2, 5, 1), Error);
    group.launched();
    EXPECT_TRUE(group.empty());
    EXPECT_TRUE(group.accepts(2));
    EXPECT_EQ(group.add(2, 5, 1), 1);  // entries keep counting over the call
}

TEST(CudaExpertGroup, IsFullAtCapacityAndStartsAfterTheLaunchedTiles) {
    std::vector<ExpertTokenTile> storage(
        static_cast<size_t>(max_expert_token_tiles(3 + 20 + 2 + 1, 4)));
    ExpertGroup group(storage, 2);
    group.add(4, 0, 3);
    EXPECT_FALSE(group.full());
    group.add(4, 3, 20);
    EXPECT_TRUE(group.full());
    EXPECT_THROW(group.add(4, 23, 2), Error);
    EXPECT_EQ(group.first_tile(), 0);
    EXPECT_EQ(group.n_tiles(), 3);
    group.launched();
    EXPECT_FALSE(group.full());
    EXPECT_EQ(group.first_entry(), 2);
    EXPECT_EQ(group.first_tile(), 3);
    EXPECT_EQ(group.add(4, 23, 2), 2);
    EXPECT_EQ(group.add(4, 25, 0), 3);  // no (row, slot)s: an entry, no tile
    EXPECT_EQ(group.n_tiles(), 4);
    EXPECT_EQ(group.n_entries(), 4);
    const ExpertTokenTile& t = group.tiles()[3];
    EXPECT_EQ(t.expert, 2);
    EXPECT_EQ(t.first, 23);
    EXPECT_EQ(t.count, 2);
}

TEST(CudaExpertGroup, TileBoundCoversAnySplitOfThePairs) {
    // Σ ⌈n_e/16⌉ over every split of 40 pairs among up to 5 experts stays within the bound.
    for (int32_t a = 1; a <= 36; ++a) {
        for (int32_t b = 1; a + b <= 39; ++b) {
            const int32_t c = 40 - a - b;
            int64_t tiles = 0;
            for (const int32_t n : {a, b, c}) tiles += (n + 15) / 16;
            EXPECT_LE(tiles, max_expert_token_tiles(40, 3));
        }
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
