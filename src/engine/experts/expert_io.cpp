#include "engine/experts/expert_io.h"

#include <algorithm>

#include "base/error.h"

namespace cherenkov::engine {

ExpertIo::ExpertIo(int n_threads, OnComplete on_complete, bool lookahead_after_demand,
                   uint64_t piece_bytes)
    : on_complete_(std::move(on_complete)),
      lookahead_after_demand_(lookahead_after_demand),
      piece_bytes_(piece_bytes) {
    if (n_threads < 1) throw_invalid("expert IO needs at least one thread");
    workers_.reserve(static_cast<size_t>(n_threads));
    for (int thread = 0; thread < n_threads; ++thread) {
        workers_.emplace_back([this](const std::stop_token& stop) { run(stop); });
    }
}

ExpertIo::~ExpertIo() {
    {
        // Reads that have not started are dropped; the rest of a started read still runs, so
        // that its handler sees the whole record.
        std::lock_guard lock(mutex_);
        for (auto it = queue_.begin(); it != queue_.end();) {
            const Read& read = reads_.at(it->id);
            if (read.queued == read.n_pieces) {
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
        std::erase_if(
            reads_, [](const auto& entry) { return entry.second.queued == entry.second.n_pieces; });
        n_unstarted_ = 0;
        lookahead_after_demand_ = false;  // nothing held back while the started reads drain
    }
    for (std::jthread& worker : workers_) worker.request_stop();
    ready_.notify_all();
    workers_.clear();
}

uint64_t ExpertIo::piece_size_for(uint64_t bytes) const {
    const auto threads = static_cast<uint64_t>(workers_.size());
    if (piece_bytes_ == 0 || threads < 2 || bytes < 2 * piece_bytes_) return bytes;
    const uint64_t pieces = std::min(threads, bytes / piece_bytes_);
    const uint64_t size = (bytes + pieces - 1) / pieces;
    return (size + kPieceAlignment - 1) / kPieceAlignment * kPieceAlignment;
}

ReadJob ExpertIo::piece_job(const Read& read, uint32_t piece) const {
    ReadJob job = read.job;
    const uint64_t begin = piece * read.piece_size;
    const uint64_t size = std::min(read.piece_size, job.destination.size() - begin);
    job.destination = job.destination.subspan(begin, size);
    job.offset += begin;
    return job;
}

uint64_t ExpertIo::submit(ReadJob job) {
    uint32_t n_pieces = 1;
    {
        std::lock_guard lock(mutex_);
        job.id = next_id_++;
        const uint64_t bytes = job.destination.size();
        const uint64_t piece_size =
            std::max<uint64_t>(job.may_split ? piece_size_for(bytes) : bytes, 1);
        n_pieces =
            static_cast<uint32_t>(std::max<uint64_t>((bytes + piece_size - 1) / piece_size, 1));
        for (uint32_t piece = 0; piece < n_pieces; ++piece) {
            queue_.insert(QueueKey{job.priority, -job.weight, job.id, piece});
        }
        reads_.emplace(job.id, Read{job, piece_size, n_pieces, n_pieces, n_pieces, {}, {}});
        ++n_unstarted_;
    }
    if (n_pieces > 1) {
        ready_.notify_all();
    } else {
        ready_.notify_one();
    }
    return job.id;
}

bool ExpertIo::promote(uint64_t id, float weight) {
    {
        std::lock_guard lock(mutex_);
        const auto found = reads_.find(id);
        if (found == reads_.end() || found->second.queued == 0) return false;
        Read& read = found->second;
        for (uint32_t piece = read.n_pieces - read.queued; piece < read.n_pieces; ++piece) {
            auto node = queue_.extract(QueueKey{read.job.priority, -read.job.weight, id, piece});
            node.value() = QueueKey{ReadPriority::Demand, -weight, id, piece};
            queue_.insert(std::move(node));
        }
        read.job.priority = ReadPriority::Demand;
        read.job.weight = weight;
    }
    ready_.notify_all();  // a held lookahead read may now start as a demand read
    return true;
}

bool ExpertIo::cancel(uint64_t id) {
    std::lock_guard lock(mutex_);
    const auto found = reads_.find(id);
    if (found == reads_.end() || found->second.queued != found->second.n_pieces) return false;
    const Read& read = found->second;
    for (uint32_t piece = 0; piece < read.n_pieces; ++piece) {
        queue_.erase(QueueKey{read.job.priority, -read.job.weight, id, piece});
    }
    reads_.erase(found);
    --n_unstarted_;
    return true;
}

size_t ExpertIo::n_queued() const {
    std::lock_guard lock(mutex_);
    return n_unstarted_;
}

bool ExpertIo::can_start() const {
    if (queue_.empty()) return false;
    // Demand reads sort first, so a lookahead read at the front means none is queued.
    if (queue_.begin()->priority == ReadPriority::Demand) return true;
    return !lookahead_after_demand_ || demand_in_flight_ == 0;
}

void ExpertIo::run(const std::stop_token& stop) {
    while (true) {
        ReadJob piece;
        {
            std::unique_lock lock(mutex_);
            if (!ready_.wait(lock, stop, [this] { return can_start(); })) return;
            const auto first = queue_.begin();
            const QueueKey key = *first;
            queue_.erase(first);
            Read& read = reads_.at(key.id);
            if (read.queued == read.n_pieces) {
                read.first_start = std::chrono::steady_clock::now();
                --n_unstarted_;
            }
            --read.queued;
            piece = piece_job(read, key.piece);
            if (piece.priority == ReadPriority::Demand) ++demand_in_flight_;
        }
        const RecordRead got = piece.reader->read(piece.destination, piece.offset);
        const auto end = std::chrono::steady_clock::now();
        bool wake_lookahead = false;
        bool last = false;
        Read done;
        {
            std::lock_guard lock(mutex_);
            if (piece.priority == ReadPriority::Demand) {
                wake_lookahead = --demand_in_flight_ == 0 && !queue_.empty();
            }
            Read& read = reads_.at(piece.id);
            // A short piece leaves the sum short of the record, as a short whole read would.
            read.total.n_bytes += got.n_bytes;
            if (read.total.error_number == 0) read.total.error_number = got.error_number;
            last = --read.unfinished == 0;
            if (last) {
                done = read;
                reads_.erase(piece.id);
            }
        }
        if (wake_lookahead) ready_.notify_all();
        if (!last) continue;
        on_complete_(done.job, done.total,
                     static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               end - done.first_start)
                                               .count()));
    }
}

}  // namespace cherenkov::engine
