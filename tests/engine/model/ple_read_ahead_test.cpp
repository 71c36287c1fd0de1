// The n-gram rows' read-ahead (engine/model/ple_read_ahead.h): rows become sorted page runs with
// neighbours merged and rows outside the table skipped, and the helper thread carries out
// requests, the latest replacing one it has not started.
#include "engine/model/ple_read_ahead.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstdint>
#include <vector>

namespace cherenkov::testing {
namespace {

using engine::PageRun;

// A table of `n_rows` rows of `row_bytes` bytes starting `lead` bytes into a page.
engine::PleWeights table_at(const uint8_t* page_start, uint64_t lead, uint64_t n_rows,
                            uint64_t row_bytes) {
    engine::PleWeights t;
    t.table = page_start + lead;
    t.table_rows = n_rows;
    t.row_bytes = row_bytes;
    return t;
}

TEST(PleReadAhead, RowsBecomeSortedMergedPageRuns) {
    alignas(4096) static const uint8_t pages[4096 * 4] = {};
    // 100-byte rows from the page start: rows 0-40 lie in page 0, row 40 spans pages 0 and 1.
    const engine::PleWeights t = table_at(pages, 0, 1000, 100);
    EXPECT_EQ(engine::row_page_runs(t, {0}, 4096), (std::vector<PageRun>{{0, 4096}}));
    EXPECT_EQ(engine::row_page_runs(t, {40}, 4096), (std::vector<PageRun>{{0, 8192}}));
    // Unsorted, duplicated, touching pages merge; a gap starts a new run.
    EXPECT_EQ(engine::row_page_runs(t, {200, 3, 3, 41, 0}, 4096),
              (std::vector<PageRun>{{0, 8192}, {16384, 4096}}));
    // Rows outside the table are skipped.
    EXPECT_EQ(engine::row_page_runs(t, {-1, 1000, 5000}, 4096), std::vector<PageRun>{});
}

TEST(PleReadAhead, RunsAreMeasuredFromTheTablesPageStart) {
    alignas(4096) static const uint8_t pages[4096 * 4] = {};
    // The table starts 4000 bytes into its first page: row 0 spans pages 0 and 1.
    const engine::PleWeights t = table_at(pages, 4000, 100, 100);
    EXPECT_EQ(engine::row_page_runs(t, {0}, 4096), (std::vector<PageRun>{{0, 8192}}));
    EXPECT_EQ(engine::row_page_runs(t, {1}, 4096), (std::vector<PageRun>{{4096, 4096}}));
}

TEST(PleReadAhead, HelperCarriesOutRequests) {
    const size_t n_bytes = 1 << 20;
    void* mapped = ::mmap(nullptr, n_bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    engine::ModelWeights weights;
    weights.layers.resize(3);
    weights.layers[1].ple = table_at(static_cast<const uint8_t*>(mapped), 0, n_bytes / 160, 160);

    engine::PleReadAhead read_ahead;
    // A call without PLE rows asks for nothing.
    read_ahead.request(weights, {{}, {}, {}});
    read_ahead.wait_idle();
    EXPECT_EQ(read_ahead.n_completed(), 0u);

    for (int call = 0; call < 50; ++call) {
        read_ahead.request(weights, {{}, {1, 900, 4000, 6000, -3}, {}});
    }
    read_ahead.wait_idle();
    // Requests made while the helper was busy replaced each other: at least one ran, at most all.
    EXPECT_GE(read_ahead.n_completed(), 1u);
    EXPECT_LE(read_ahead.n_completed(), 50u);
    ::munmap(mapped, n_bytes);
}

}  // namespace
}  // namespace cherenkov::testing
