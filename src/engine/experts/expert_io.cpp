#include "engine/experts/expert_io.h"

#include <chrono>

#include "base/error.h"

namespace cherenkov::engine {

ExpertIo::ExpertIo(int n_threads, OnComplete on_complete) : on_complete_(std::move(on_complete)) {
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
    std::lock_guard lock(mutex_);
    const auto found = keys_.find(id);
    if (found == keys_.end()) return false;
    auto node = queue_.extract(found->second);
    node.key() = QueueKey{ReadPriority::Demand, -weight, id};
    node.mapped().priority = ReadPriority::Demand;
    node.mapped().weight = weight;
    found->second = node.key();
    queue_.insert(std::move(node));
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

void ExpertIo::run(const std::stop_token& stop) {
    while (true) {
        ReadJob job;
        {
            std::unique_lock lock(mutex_);
            if (!ready_.wait(lock, stop, [this] { return !queue_.empty(); })) return;
            auto first = queue_.begin();
            job = first->second;
            keys_.erase(job.id);
            queue_.erase(first);
        }
        const auto start = std::chrono::steady_clock::now();
        const RecordRead read = job.reader->read(job.destination, job.offset);
        const auto duration = std::chrono::steady_clock::now() - start;
        on_complete_(job, read,
                     static_cast<uint64_t>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count()));
    }
}

}  // namespace cherenkov::engine
