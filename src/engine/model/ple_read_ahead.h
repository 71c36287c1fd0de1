// Starts the page reads of a call's n-gram table rows on a helper thread.
//
// On real models the n-gram tables are far larger than memory, so their rows are faulted in on
// demand; asking the kernel for them when a call starts overlaps those reads with the layers
// before the PLE layer. One posix_madvise per row costs about 2 µs even when the page is already
// resident, and a 512-token prefill asks for 2,048 rows: on the caller that was 4 ms of a 20 ms
// prefill with the GPU idle (CUPTI trace). The helper takes that off the caller's path. It is only
// a hint: a call whose rows are not yet read faults them in itself, and a new request replaces one
// the helper has not started.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/model/model_weights.h"

namespace cherenkov::engine {

class PleReadAhead {
public:
    PleReadAhead();
    ~PleReadAhead();
    PleReadAhead(const PleReadAhead&) = delete;
    PleReadAhead& operator=(const PleReadAhead&) = delete;

    // ids[l]: the rows of layer l's table the call will gather (empty for layers without PLE).
    // `weights` must outlive this object. From one thread at a time (the model's caller).
    void request(const ModelWeights& weights, const std::vector<std::vector<int64_t>>& ids);

    // Blocks until every request so far has been handed to the kernel (for tests).
    void wait_idle();

    // Requests the helper has carried out; a replaced request is not counted.
    uint64_t n_completed() const;

private:
    struct Job {
        const PleWeights* table;
        std::vector<int64_t> rows;
    };

    void run();

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    std::vector<Job> pending_;
    bool has_pending_ = false;
    bool busy_ = false;
    bool stopping_ = false;
    uint64_t n_completed_ = 0;
    std::thread worker_;  // started by the first request with rows
};

// The pages under `rows` of `table` as byte ranges from the table's page-aligned start, sorted,
// with touching or overlapping pages merged into one run; rows outside the table are skipped.
struct PageRun {
    uint64_t offset = 0;
    uint64_t n_bytes = 0;
    bool operator==(const PageRun&) const = default;
};
std::vector<PageRun> row_page_runs(const PleWeights& table, std::vector<int64_t> rows,
                                   uint64_t page_bytes);

// Asks the kernel to read the pages under `rows` of `table`, one call per run.
void advise_rows(const PleWeights& table, std::vector<int64_t> rows);

}  // namespace cherenkov::engine
