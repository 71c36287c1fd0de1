// ThreadPool: workers spin briefly after each loop (the forward pass issues loops back to back),
// then sleep on a futex (std::atomic::wait). A loop is published as one 64-bit ticket: the
// generation in the high bits, the number of workers asked to help in the low 16. A worker joins
// the loop through `joined` before it reads the loop's fields; once every range is claimed the
// caller closes the loop and waits only for workers that joined, so a worker the OS has not
// scheduled yet (a shared or oversubscribed machine) never delays the caller.
#include "engine/cpu/thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

// Loops are cut into at most this many ranges per thread; ranges are claimed dynamically, so a
// worker that the OS preempts (the 2-core CI VM is shared) delays the loop by one range, not by
// a whole share. The cut itself depends only on n, grain and the thread count.
constexpr size_t kRangesPerThread = 4;

// How long an idle worker (or a caller waiting for workers) spins before sleeping. Loops of one
// decode step follow each other within microseconds; a sleeping worker costs a futex wake-up.
constexpr auto kSpinTime = std::chrono::microseconds(50);

constexpr int kParticipantBits = 16;
constexpr uint64_t kParticipantMask = (uint64_t{1} << kParticipantBits) - 1;

// `joined`: the loop's generation (low 32 bits) << 32 | closed flag | number of workers joined.
constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kJoinedMask = kClosed - 1;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spins for up to kSpinTime while `word` equals `old`, then sleeps until it changes. Returns
// the new value.
template <typename T>
T wait_for_change(const std::atomic<T>& word, T old) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int spin = 0;; ++spin) {
        const T value = word.load(std::memory_order_acquire);
        if (value != old) return value;
        cpu_relax();
        if ((spin & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
    }
    for (;;) {
        word.wait(old, std::memory_order_acquire);
        const T value = word.load(std::memory_order_acquire);
        if (value != old) return value;
    }
}

}  // namespace

struct ThreadPool::Impl {
    explicit Impl(int n_threads_total);
    ~Impl();

    void worker_loop(size_t worker_index);
    // Joins the loop of `generation` unless the caller has closed it.
    bool try_join(uint64_t generation);
    // Claims and runs ranges of the current loop until none are left.
    void run_ranges();

    int n_threads = 1;

    // The current loop; written by the caller before the ticket that announces it, read by the
    // workers that take part after they load that ticket.
    const std::function<void(size_t, size_t)>* body = nullptr;
    size_t n = 0;
    size_t n_ranges = 0;
    std::atomic<size_t> next_range{0};
    std::atomic<uint64_t> joined{0};
    std::atomic<uint32_t> n_finished_workers{0};
    std::atomic<bool> busy{false};
    std::atomic<bool> stopping{false};

    // generation << kParticipantBits | number of workers taking part in that loop.
    std::atomic<uint64_t> ticket{0};

    std::mutex failure_mutex;  // guards failure and failure_range
    std::exception_ptr failure;
    size_t failure_range = std::numeric_limits<size_t>::max();

    std::vector<std::jthread> workers;
};

ThreadPool::Impl::Impl(int n_threads_total) : n_threads(n_threads_total) {
    // Workers are numbered 1..n_threads-1; the caller is thread 0.
    workers.reserve(static_cast<size_t>(n_threads - 1));
    for (int worker = 1; worker < n_threads; ++worker) {
        workers.emplace_back([this, worker] { worker_loop(static_cast<size_t>(worker)); });
    }
}

ThreadPool::Impl::~Impl() {
    stopping.store(true, std::memory_order_release);
    ticket.fetch_add(uint64_t{1} << kParticipantBits, std::memory_order_acq_rel);
    ticket.notify_all();
    workers.clear();  // joins
}

void ThreadPool::Impl::run_ranges() {
    for (;;) {
        const size_t range = next_range.fetch_add(1, std::memory_order_relaxed);
        if (range >= n_ranges) return;
        // Balanced cut: every range is floor or ceil of n / n_ranges long.
        const size_t begin = range * n / n_ranges;
        const size_t end = (range + 1) * n / n_ranges;
        try {
            (*body)(begin, end);
        } catch (...) {
            std::lock_guard lock(failure_mutex);
            // Keep the exception of the lowest range, so the caller sees the same error
            // whichever thread got there first.
            if (range < failure_range) {
                failure_range = range;
                failure = std::current_exception();
            }
        }
    }
}

bool ThreadPool::Impl::try_join(uint64_t generation) {
    uint64_t state = joined.load(std::memory_order_acquire);
    for (;;) {
        if ((state >> 32) != (generation & 0xFFFFFFFFU) || (state & kClosed) != 0) return false;
        if (joined.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) return true;
    }
}

void ThreadPool::Impl::worker_loop(size_t worker_index) {
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_change(ticket, seen);
        if (stopping.load(std::memory_order_acquire)) return;
        if (worker_index > (seen & kParticipantMask)) continue;
        if (!try_join(seen >> kParticipantBits)) continue;
        run_ranges();
        n_finished_workers.fetch_add(1, std::memory_order_acq_rel);
        n_finished_workers.notify_one();
    }
}

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    n_threads = std::min<int>(n_threads, static_cast<int>(kParticipantMask) + 1);
    impl_ = new Impl(n_threads);
}

ThreadPool::~ThreadPool() {
    delete impl_;
}

int ThreadPool::size() const {
    return impl_->n_threads;
}

void ThreadPool::parallel_for(size_t n, size_t grain,
                              const std::function<void(size_t, size_t)>& body) {
    if (n == 0) return;
    grain = std::max<size_t>(grain, 1);
    const size_t n_threads = static_cast<size_t>(impl_->n_threads);
    const size_t n_ranges = std::min(std::max<size_t>(n / grain, 1), n_threads * kRangesPerThread);
    if (n_ranges == 1) {
        body(0, n);
        return;
    }

    Impl& impl = *impl_;
    if (impl.busy.exchange(true, std::memory_order_acquire)) {
        throw_internal("ThreadPool::parallel_for called while a loop is running on the pool");
    }
    impl.body = &body;
    impl.n = n;
    impl.n_ranges = n_ranges;
    impl.next_range.store(0, std::memory_order_relaxed);
    impl.n_finished_workers.store(0, std::memory_order_relaxed);
    impl.failure = nullptr;
    impl.failure_range = std::numeric_limits<size_t>::max();

    const uint64_t n_helpers = std::min(n_ranges, n_threads) - 1;
    const uint64_t generation =
        (impl.ticket.load(std::memory_order_relaxed) >> kParticipantBits) + 1;
    impl.joined.store((generation & 0xFFFFFFFFU) << 32, std::memory_order_relaxed);
    impl.ticket.store(generation << kParticipantBits | n_helpers, std::memory_order_release);
    impl.ticket.notify_all();

    impl.run_ranges();

    // Every range is claimed: close the loop to latecomers, then wait for the workers that
    // joined to leave run_ranges (after that the loop's fields may be rewritten).
    const auto n_joined = static_cast<uint32_t>(
        impl.joined.fetch_or(kClosed, std::memory_order_acq_rel) & kJoinedMask);
    uint32_t finished = impl.n_finished_workers.load(std::memory_order_acquire);
    while (finished != n_joined) finished = wait_for_change(impl.n_finished_workers, finished);

    impl.body = nullptr;
    std::exception_ptr failure = impl.failure;
    impl.failure = nullptr;
    impl.busy.store(false, std::memory_order_release);
    if (failure) std::rethrow_exception(failure);
}

}  // namespace cherenkov::engine
