// A fixed pool of worker threads for data-parallel loops. `parallel_for` splits [0, n) into
// contiguous chunks, runs them on the workers and the calling thread, and returns when all are
// done. The split depends only on n, the grain and the thread count, never on timing, so a kernel
// that writes disjoint outputs per index gives the same bytes on every run.
#pragma once

#include <cstddef>
#include <functional>

namespace cherenkov::engine {

class ThreadPool {
public:
    // n_threads ≤ 0: the number of online CPUs. 1: everything runs on the caller.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const;  // threads including the caller

    // Calls body(begin, end) over disjoint ranges covering [0, n). Ranges are at least `grain`
    // long (except the last), so small loops stay on the caller. Exceptions thrown by body are
    // rethrown on the caller after every chunk has finished. Not reentrant: body must not call
    // parallel_for on the same pool.
    void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& body);

private:
    struct Impl;
    Impl* impl_;
};

}  // namespace cherenkov::engine
