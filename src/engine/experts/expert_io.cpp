#include "engine/experts/expert_io.h"

#include <chrono>

#include "base/error.h"

namespace cherenkov::engine {

ExpertIo::ExpertIo(int n_threads, OnComplete on_complete, bool lookahead_after_demand)
    : on_complete_(std::move(on_complete)), lookahead_after_demand_(lookahead_after_demand) {
    if (n_threads < 1) throw_invalid("expert IO needs at least one thread");
    workers_.reserve(static_cast<size_t>(n_threads));
    for (int thread = 0; thread < n_threads; ++thread) {
        workers_.emplace_back([this](const std::stop_token& stop) { run(stop); });
    }
}

ExpertIo::~ExpertIo() {
    {
        std::lock_guard lock(mutex_);
        queue_.clear();
        keys_.clear();
    }
    for (std::jthread& worker : workers_) worker.request_stop();
    workers_.clear();
}

uint64_t ExpertIo::submit(ReadJob job) {
    {
        std::lock_guard lock(mutex_);
        job.id = next_id_++;
        const QueueKey key{job.priority, -job.weight, job.id};
        keys_.emplace(job.id, key);
        queue_.emplace(key, job);
    }
    ready_.notify_one();
    return job.id;
}

bool ExpertIo::promote(uint64_t id, float weight) {
    {
        std::lock_guard lock(mutex_);
        const auto found = keys_.find(id);
        if (found == keys_.end()) return false;
        auto node = queue_.extract(found->second);
        node.key() = QueueKey{ReadPriority::Demand, -weight, id};
        node.mapped().priority = ReadPriority::Demand;
        node.mapped().weight = weight;
        found->second = node.key();
        queue_.insert(std::move(node));
    }
    ready_.notify_one();  // a held lookahead read may now start as a demand read
    return true;
}

bool ExpertIo::cancel(uint64_t id) {
    std::lock_guard lock(mutex_);
    const auto found = keys_.find(id);
    if (found == keys_.end()) return false;
    queue_.erase(found->second);
    keys_.erase(found);
    return true;
}

size_t ExpertIo::n_queued() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

bool ExpertIo::can_start() const {
    if (queue_.empty()) return false;
    // Demand reads sort first, so a lookahead read at the front means none is queued.
    if (queue_.begin()->first.priority == ReadPriority::Demand) return true;
    return !lookahead_after_demand_ || demand_in_flight_ == 0;
}

void ExpertIo::run(const std::stop_token& stop) {
    while (true) {
        ReadJob job;
        {
            std::unique_lock lock(mutex_);
            if (!ready_.wait(lock, stop, [this] { return can_start(); })) return;
            auto first = queue_.begin();
            job = first->second;
            keys_.erase(job.id);
            queue_.erase(first);
            if (job.priority == ReadPriority::Demand) ++demand_in_flight_;
        }
        const auto start = std::chrono::steady_clock::now();
        const RecordRead read = job.reader->read(job.destination, job.offset);
        const auto duration = std::chrono::steady_clock::now() - start;
        if (job.priority == ReadPriority::Demand) {
            bool wake_lookahead = false;
            {
                std::lock_guard lock(mutex_);
                wake_lookahead = --demand_in_flight_ == 0 && !queue_.empty();
            }
            if (wake_lookahead) ready_.notify_all();
        }
        on_complete_(job, read,
                     static_cast<uint64_t>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count()));
    }
}

}  // namespace cherenkov::engine
