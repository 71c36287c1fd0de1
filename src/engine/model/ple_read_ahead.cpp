#include "engine/model/ple_read_ahead.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace cherenkov::engine {

std::vector<PageRun> row_page_runs(const PleWeights& table, std::vector<int64_t> rows,
                                   uint64_t page_bytes) {
    std::erase_if(rows, [&](int64_t r) {
        return r < 0 || static_cast<uint64_t>(r) >= table.table_rows;
    });
    std::sort(rows.begin(), rows.end());
    const uint64_t lead = reinterpret_cast<uintptr_t>(table.table) % page_bytes;
    std::vector<PageRun> runs;
    for (int64_t row : rows) {
        const uint64_t first = lead + static_cast<uint64_t>(row) * table.row_bytes;
        const uint64_t begin = first / page_bytes * page_bytes;
        const uint64_t end = (first + table.row_bytes + page_bytes - 1) / page_bytes * page_bytes;
        if (!runs.empty() && begin <= runs.back().offset + runs.back().n_bytes) {
            PageRun& run = runs.back();  // touches or overlaps the last run: extend it
            run.n_bytes = std::max(run.offset + run.n_bytes, end) - run.offset;
        } else {
            runs.push_back({begin, end - begin});
        }
    }
    return runs;
}

void advise_rows(const PleWeights& table, std::vector<int64_t> rows) {
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    // The runs are offsets from the table's page-aligned start, so the addresses are built from
    // the table pointer itself (no integer-to-pointer casts).
    auto* base = const_cast<uint8_t*>(table.table - reinterpret_cast<uintptr_t>(table.table) % page);
    for (const PageRun& run : row_page_runs(table, std::move(rows), page)) {
        ::posix_madvise(base + run.offset, run.n_bytes, POSIX_MADV_WILLNEED);
    }
}

PleReadAhead::PleReadAhead() = default;

PleReadAhead::~PleReadAhead() {
    if (!worker_.joinable()) return;
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    worker_.join();
}

void PleReadAhead::request(const ModelWeights& weights,
                           const std::vector<std::vector<int64_t>>& ids) {
    std::vector<Job> jobs;
    for (size_t l = 0; l < ids.size() && l < weights.layers.size(); ++l) {
        if (weights.layers[l].ple && !ids[l].empty()) {
            jobs.push_back({&*weights.layers[l].ple, ids[l]});
        }
    }
    if (jobs.empty()) return;
    {
        const std::lock_guard lock(mutex_);
        pending_ = std::move(jobs);
        has_pending_ = true;
    }
    // Started by the first call with rows, so a model without PLE layers has no helper.
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    wake_.notify_one();
}

void PleReadAhead::wait_idle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return !has_pending_ && !busy_; });
}

uint64_t PleReadAhead::n_completed() const {
    const std::lock_guard lock(mutex_);
    return n_completed_;
}

void PleReadAhead::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || has_pending_; });
        if (stopping_) return;
        std::vector<Job> jobs = std::move(pending_);
        has_pending_ = false;
        busy_ = true;
        lock.unlock();
        for (Job& job : jobs) advise_rows(*job.table, std::move(job.rows));
        lock.lock();
        busy_ = false;
        ++n_completed_;
        if (!has_pending_) idle_.notify_all();
    }
}

}  // namespace cherenkov::engine
