// Placeholder single-threaded pool until the worker implementation lands (same contract).
#include "engine/cpu/thread_pool.h"

namespace cherenkov::engine {

struct ThreadPool::Impl {
    int n_threads = 1;
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl{n_threads > 0 ? n_threads : 1}) {}
ThreadPool::~ThreadPool() { delete impl_; }
int ThreadPool::size() const { return 1; }

void ThreadPool::parallel_for(size_t n, size_t /*grain*/,
                              const std::function<void(size_t, size_t)>& body) {
    if (n > 0) body(0, n);
}

}  // namespace cherenkov::engine
