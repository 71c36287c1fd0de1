// The routing of a prefill call grouped by expert on the device (engine/cuda/expert_grouping.h)
// against the host's counting sort: the tiles' count and layout, every (row, slot) index placed
// once within its expert's run, each row's parts in increasing expert index with their weights,
// and the hit count; bad arguments are refused. (That GEMMs over these tiles give the host
// tiles' bits is in expert_gemm_test.cpp.) Skips without a device; in a build without CUDA it
// checks that calls say so.
#include "engine/cuda/expert_grouping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/error.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_test.h"
#include "engine/cuda/expert_group.h"

namespace cherenkov::engine::cuda {
namespace {

// A router's output: T rows of `top` distinct experts in [0, E), skewed so that a few experts
// take several tiles and some none, with positive weights.
struct HostRouting {
    int64_t n_rows;
    int top;
    int n_experts;
    std::vector<int32_t> experts;
    std::vector<float> weights;
};

HostRouting make_routing(int64_t n_rows, int top, int n_experts, uint32_t seed) {
    HostRouting r{n_rows, top, n_experts, {}, {}};
    std::mt19937 rng(seed);
    // Expert e drawn with weight 1/(e + 1): the low experts are popular, the high ones rare.
    std::vector<double> odds(static_cast<size_t>(n_experts));
    for (int e = 0; e < n_experts; ++e) odds[static_cast<size_t>(e)] = 1.0 / (e + 1);
    std::discrete_distribution<int> pick(odds.begin(), odds.end());
    std::uniform_real_distribution<float> weight(0.01F, 1.0F);
    for (int64_t t = 0; t < n_rows; ++t) {
        std::vector<int32_t> row;
        while (static_cast<int>(row.size()) < top) {
            const int e = pick(rng);
            if (std::find(row.begin(), row.end(), e) == row.end()) row.push_back(e);
        }
        for (const int32_t e : row) {
            r.experts.push_back(e);
            r.weights.push_back(weight(rng));
        }
    }
    return r;
}

struct Grouped {
    std::vector<int32_t> slots, part_rows;
    std::vector<ExpertTokenTile> tiles;
    std::vector<float> part_weights;
    int32_t n_tiles = 0;
    uint64_t hits = 0;
};

Grouped group_on_device(const HostRouting& r, uint64_t hits_before) {
    const auto tk = static_cast<size_t>(r.n_rows * r.top);
    const auto max_tiles = static_cast<size_t>(max_expert_token_tiles(
        static_cast<int64_t>(tk), std::min<int64_t>(r.n_experts, static_cast<int64_t>(tk))));
    DeviceBuffer experts(tk * 4), weights(tk * 4), slots(tk * 4), part_rows(tk * 4),
        part_weights(tk * 4), tiles(max_tiles * sizeof(ExpertTokenTile)), n_tiles(4), hits(8);
    experts.upload(r.experts.data(), tk * 4);
    weights.upload(r.weights.data(), tk * 4);
    for (DeviceBuffer* b : {&slots, &part_rows, &part_weights, &tiles, &n_tiles}) b->fill(0xFF);
    hits.upload(&hits_before, 8);
    const DeviceExpertGroups out{slots.as<int32_t>(),    tiles.as<ExpertTokenTile>(),
                                 n_tiles.as<int32_t>(),  part_rows.as<int32_t>(),
                                 part_weights.as<float>(), hits.as<unsigned long long>()};
    group_by_expert(experts.as<int32_t>(), weights.as<float>(), r.n_rows, r.top, r.n_experts, out,
                    nullptr);
    device_synchronize();
    Grouped g;
    g.slots.resize(tk);
    g.part_rows.resize(tk);
    g.part_weights.resize(tk);
    g.tiles.resize(max_tiles);
    slots.download(g.slots.data(), tk * 4);
    part_rows.download(g.part_rows.data(), tk * 4);
    part_weights.download(g.part_weights.data(), tk * 4);
    tiles.download(g.tiles.data(), max_tiles * sizeof(ExpertTokenTile));
    n_tiles.download(&g.n_tiles, 4);
    hits.download(&g.hits, 8);
    return g;
}

void check_grouping(const HostRouting& r) {
    const auto tk = static_cast<size_t>(r.n_rows * r.top);
    const Grouped g = group_on_device(r, 1000);
    // The host's counting sort: expert e's run starts at first[e].
    std::vector<int32_t> count(static_cast<size_t>(r.n_experts), 0);
    for (const int32_t e : r.experts) ++count[static_cast<size_t>(e)];
    std::vector<int32_t> first(static_cast<size_t>(r.n_experts) + 1, 0);
    std::partial_sum(count.begin(), count.end(), first.begin() + 1);
    int32_t expected_tiles = 0;
    uint64_t used = 0;
    for (const int32_t c : count) {
        expected_tiles += (c + kExpertTokenTile - 1) / kExpertTokenTile;
        used += c > 0 ? 1 : 0;
    }
    ASSERT_EQ(g.n_tiles, expected_tiles);
    EXPECT_EQ(g.hits, 1000 + used);
    // Tiles in expert order, each expert's run cut into full tiles and one partial last tile.
    size_t tile = 0;
    for (int e = 0; e < r.n_experts; ++e) {
        for (int32_t done = 0; done < count[static_cast<size_t>(e)]; done += kExpertTokenTile) {
            ASSERT_LT(tile, static_cast<size_t>(g.n_tiles));
            const ExpertTokenTile& t = g.tiles[tile++];
            EXPECT_EQ(t.expert, e);
            EXPECT_EQ(t.first, first[static_cast<size_t>(e)] + done);
            EXPECT_EQ(t.count, std::min(kExpertTokenTile, count[static_cast<size_t>(e)] - done));
        }
    }
    // Every index once, inside its expert's run.
    std::vector<int> seen(tk, 0);
    for (int e = 0; e < r.n_experts; ++e) {
        for (int32_t p = first[static_cast<size_t>(e)]; p < first[static_cast<size_t>(e) + 1]; ++p) {
            const int32_t i = g.slots[static_cast<size_t>(p)];
            ASSERT_GE(i, 0);
            ASSERT_LT(static_cast<size_t>(i), tk);
            EXPECT_EQ(r.experts[static_cast<size_t>(i)], e) << "position " << p;
            ++seen[static_cast<size_t>(i)];
        }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<ptrdiff_t>(tk));
    // Each row's parts: its own indices, in increasing expert index, with their weights.
    for (int64_t t = 0; t < r.n_rows; ++t) {
        int32_t previous = -1;
        for (int k = 0; k < r.top; ++k) {
            const auto at = static_cast<size_t>(t * r.top + k);
            const int32_t i = g.part_rows[at];
            ASSERT_GE(i, t * r.top);
            ASSERT_LT(i, (t + 1) * r.top);
            const int32_t e = r.experts[static_cast<size_t>(i)];
            EXPECT_GT(e, previous) << "row " << t;
            previous = e;
            EXPECT_EQ(g.part_weights[at], r.weights[static_cast<size_t>(i)]);
        }
    }
}

class CudaExpertGrouping : public DeviceTest {};

TEST_F(CudaExpertGrouping, MatchesTheHostCountingSort) {
    // One row (the smallest prefill), a prompt chunk, Flash's 512 × 10 on 700 rows (passes of
    // 1024 threads), and experts that do not divide into the scan warp's lanes.
    check_grouping(make_routing(1, 4, 8, 1));
    check_grouping(make_routing(37, 4, 64, 2));
    check_grouping(make_routing(700, 10, 512, 3));
    check_grouping(make_routing(129, 3, 45, 4));
}

TEST_F(CudaExpertGrouping, RefusesBadArguments) {
    DeviceBuffer b(1024);
    const DeviceExpertGroups out{b.as<int32_t>(), b.as<ExpertTokenTile>(), b.as<int32_t>(),
                                 b.as<int32_t>(), b.as<float>(),            nullptr};
    const auto* e = b.as<int32_t>();
    const auto* w = b.as<float>();
    EXPECT_THROW(group_by_expert(e, w, 4, 0, 8, out, nullptr), Error);   // top 0
    EXPECT_THROW(group_by_expert(e, w, 4, 9, 8, out, nullptr), Error);   // top above E
    EXPECT_THROW(group_by_expert(e, w, 4, 2, kMaxGroupedExperts + 1, out, nullptr), Error);
    DeviceExpertGroups no_tiles = out;
    no_tiles.tiles = nullptr;
    EXPECT_THROW(group_by_expert(e, w, 4, 2, 8, no_tiles, nullptr), Error);
    group_by_expert(e, w, 0, 2, 8, out, nullptr);  // no rows: nothing to do
}

TEST(ExpertGroupingUnavailable, SaysBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    EXPECT_THROW(group_by_expert(nullptr, nullptr, 1, 1, 1, DeviceExpertGroups{}, nullptr), Error);
}

}  // namespace
}  // namespace cherenkov::engine::cuda
