#include "store/packer/work_pool.h"

namespace cherenkov::store {

WorkPool::WorkPool(unsigned n_threads) {
    if (n_threads == 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned index = 1; index < n_threads; ++index) {
        workers_.emplace_back([this] { worker_loop(); });
    }
}

WorkPool::~WorkPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
}

void WorkPool::drain() {
    std::unique_lock lock(mutex_);
    while (task_ != nullptr && next_task_ < n_tasks_) {
        const size_t task = next_task_++;
        const std::function<void(size_t)>* function = task_;
        lock.unlock();
        try {
            (*function)(task);
        } catch (...) {
            lock.lock();
            if (!failure_) failure_ = std::current_exception();
            lock.unlock();
        }
        lock.lock();
        if (++n_finished_ == n_tasks_) done_.notify_all();
    }
}

void WorkPool::worker_loop() {
    size_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
        }
        drain();
    }
}

void WorkPool::run(size_t n_tasks, const std::function<void(size_t)>& task) {
    if (n_tasks == 0) return;
    if (n_tasks == 1 || workers_.empty()) {
        for (size_t index = 0; index < n_tasks; ++index) task(index);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        task_ = &task;
        next_task_ = 0;
        n_tasks_ = n_tasks;
        n_finished_ = 0;
        failure_ = nullptr;
        ++generation_;
    }
    wake_.notify_all();
    drain();
    std::exception_ptr failure;
    {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return n_finished_ == n_tasks_; });
        task_ = nullptr;
        failure = failure_;
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace cherenkov::store
