#include "engine/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

using Ranges = std::set<std::pair<size_t, size_t>>;

Ranges record_ranges(ThreadPool& pool, size_t n, size_t grain, std::vector<int>* visits) {
    std::mutex mutex;
    Ranges ranges;
    visits->assign(n, 0);
    pool.parallel_for(n, grain, [&](size_t begin, size_t end) {
        {
            std::lock_guard lock(mutex);
            ranges.insert({begin, end});
        }
        for (size_t index = begin; index < end; ++index) ++(*visits)[index];
    });
    return ranges;
}

TEST(ThreadPool, CoversEveryIndexOnceWithRangesOfAtLeastTheGrain) {
    for (const int n_threads : {1, 2, 3, 4}) {
        ThreadPool pool(n_threads);
        EXPECT_EQ(pool.size(), n_threads);
        for (const size_t n : {0UL, 1UL, 5UL, 100UL, 1000UL, 12345UL}) {
            for (const size_t grain : {0UL, 1UL, 7UL, 64UL, 100000UL}) {
                std::vector<int> visits;
                const Ranges ranges = record_ranges(pool, n, grain, &visits);
                for (size_t index = 0; index < n; ++index) {
                    ASSERT_EQ(visits[index], 1) << "n=" << n << " grain=" << grain;
                }
                for (const auto& [begin, end] : ranges) {
                    EXPECT_GE(end - begin, std::min(std::max<size_t>(grain, 1), n));
                }
                // The cut depends only on n, grain and the thread count.
                std::vector<int> again;
                EXPECT_EQ(record_ranges(pool, n, grain, &again), ranges);
            }
        }
    }
}

TEST(ThreadPool, SmallLoopsRunInlineOnTheCaller) {
    ThreadPool pool(4);
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> elsewhere{0};
    pool.parallel_for(15, 8, [&](size_t, size_t) {
        if (std::this_thread::get_id() != caller) ++elsewhere;
    });
    EXPECT_EQ(elsewhere.load(), 0);
}

TEST(ThreadPool, LargeLoopsUseTheWorkers) {
    ThreadPool pool(2);
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> on_worker{0};
    // Each range waits a little so the worker surely claims one.
    for (int attempt = 0; attempt < 50 && on_worker.load() == 0; ++attempt) {
        pool.parallel_for(64, 1, [&](size_t, size_t) {
            if (std::this_thread::get_id() != caller) ++on_worker;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        });
    }
    EXPECT_GT(on_worker.load(), 0);
}

TEST(ThreadPool, RethrowsTheLowestRangesExceptionAfterAllRangesFinish) {
    ThreadPool pool(3);
    std::atomic<size_t> covered{0};
    try {
        pool.parallel_for(1200, 1, [&](size_t begin, size_t end) {
            covered += end - begin;
            if (begin >= 300) throw_corrupt("range at " + std::to_string(begin));
        });
        FAIL() << "no exception";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        // 12 ranges of 100: the lowest failing one starts at 300.
        EXPECT_STREQ(error.what(), "range at 300");
    }
    EXPECT_EQ(covered.load(), 1200U);

    // The pool stays usable.
    std::atomic<size_t> sum{0};
    pool.parallel_for(1000, 1, [&](size_t begin, size_t end) {
        for (size_t index = begin; index < end; ++index) sum += index;
    });
    EXPECT_EQ(sum.load(), 999U * 1000U / 2U);
}

TEST(ThreadPool, ExceptionFromAnInlineLoopPropagates) {
    ThreadPool pool(2);
    EXPECT_THROW(pool.parallel_for(3, 8, [](size_t, size_t) { throw_io("inline"); }), Error);
}

TEST(ThreadPool, NestedParallelLoopIsAnInternalError) {
    ThreadPool pool(2);
    try {
        pool.parallel_for(
            100, 1, [&](size_t, size_t) { pool.parallel_for(100, 1, [](size_t, size_t) {}); });
        FAIL() << "nested loop accepted";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Internal);
    }
}

TEST(ThreadPool, ManyShortLoopsInARow) {
    ThreadPool pool(4);
    std::vector<uint64_t> values(4096);
    for (int iteration = 0; iteration < 3000; ++iteration) {
        pool.parallel_for(values.size(), 64, [&](size_t begin, size_t end) {
            for (size_t index = begin; index < end; ++index) values[index] += index;
        });
    }
    for (size_t index = 0; index < values.size(); ++index) ASSERT_EQ(values[index], 3000 * index);
}

TEST(ThreadPool, DefaultSizeIsTheNumberOfCpus) {
    ThreadPool pool;
    EXPECT_GE(pool.size(), 1);
    ThreadPool single(1);
    EXPECT_EQ(single.size(), 1);
}

}  // namespace
}  // namespace cherenkov::engine
