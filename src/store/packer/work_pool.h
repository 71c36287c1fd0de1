// A fixed set of worker threads that run numbered tasks: run(n_tasks, fn) calls fn(task) once for
// every task in [0, n_tasks) across the workers and the calling thread, and returns when all are
// done. Callers split work into fixed-size tasks, so results never depend on the thread count.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cherenkov::store {

class WorkPool {
public:
    explicit WorkPool(unsigned n_threads);  // 0 = hardware concurrency
    ~WorkPool();
    WorkPool(const WorkPool&) = delete;
    WorkPool& operator=(const WorkPool&) = delete;

    unsigned n_threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Rethrows the first exception a task threw, after every task has finished.
    void run(size_t n_tasks, const std::function<void(size_t)>& task);

private:
    void worker_loop();
    void drain();

    std::mutex mutex_;  // guards every member below
    std::condition_variable wake_;
    std::condition_variable done_;
    const std::function<void(size_t)>* task_ = nullptr;
    size_t next_task_ = 0;
    size_t n_tasks_ = 0;
    size_t n_finished_ = 0;
    size_t generation_ = 0;
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::vector<std::thread> workers_;
};

}  // namespace cherenkov::store
