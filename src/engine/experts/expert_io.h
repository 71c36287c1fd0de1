// IO workers for expert records: a priority queue of reads and a pool of threads, each with one
// read in flight, reading straight into pool slots. Demand reads always go before lookahead
// reads; within a class the stronger expert (larger max routing weight) goes first, then the
// older request. By default a lookahead read starts only while no demand read is queued or in
// flight, so it never takes disk bandwidth from a read the engine is waiting for (seed: lookahead
// reads start after the current block's required misses finish). Queued reads can be promoted
// (a fetch needs a predicted expert now) or cancelled (a lookahead read no longer wanted);
// started reads always run to completion. A large read may be cut into pieces that several
// threads read at once (one record's read from the page cache took ~0.6 ms on one thread, and a
// decode layer waits for its misses); it completes once, when its last piece lands.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/experts/record_reader.h"

namespace cherenkov::engine {

enum class ReadPriority : uint8_t { Demand = 0, Lookahead = 1 };

struct ReadJob {
    uint64_t id = 0;  // set by submit
    ReadPriority priority = ReadPriority::Demand;
    float weight = 0.0F;  // max routing weight of the expert: stronger first
    RecordReader* reader = nullptr;
    std::span<std::byte> destination;  // the slot's first record_bytes
    uint64_t offset = 0;               // in the reader's file
    uint32_t slot = 0;                 // for the completion handler; ExpertIo ignores it
    // Whether idle threads may read pieces of it: worth it for the few reads a decode layer
    // waits on, not for a prefill chunk's burst, whose reads already keep every thread busy.
    bool may_split = false;
};

class ExpertIo {
public:
    // Called on an IO thread after each read, with no ExpertIo lock held. Must not throw.
    using OnComplete =
        std::function<void(const ReadJob& job, const RecordRead& read, uint64_t duration_ns)>;

    // Reads marked may_split of at least 2·piece_bytes are cut into up to n_threads pieces of at
    // least piece_bytes, at kPieceAlignment boundaries (piece_bytes 0: never cut).
    static constexpr uint64_t kDefaultPieceBytes = uint64_t{512} << 10;
    // Records and slots are page-aligned: pieces at 4 KiB multiples keep O_DIRECT's alignment.
    static constexpr uint64_t kPieceAlignment = 4096;

    // lookahead_after_demand: hold lookahead reads while demand reads are queued or in flight.
    ExpertIo(int n_threads, OnComplete on_complete, bool lookahead_after_demand = true,
             uint64_t piece_bytes = kDefaultPieceBytes);
    // Drops the reads not yet started (their handlers never run); the rest of a started read
    // still runs, and its handler with it.
    ~ExpertIo();
    ExpertIo(const ExpertIo&) = delete;
    ExpertIo& operator=(const ExpertIo&) = delete;

    // Queues a read and returns its id.
    uint64_t submit(ReadJob job);
    // Raises a queued read (the pieces of it still queued) to Demand priority with `weight`.
    // False when no piece of it is queued.
    bool promote(uint64_t id, float weight);
    // Removes a queued read. False when it has already started (its handler will run).
    bool cancel(uint64_t id);

    int n_threads() const { return static_cast<int>(workers_.size()); }
    // Reads not yet started.
    size_t n_queued() const;

private:
    struct QueueKey {
        ReadPriority priority;
        float negative_weight;
        uint64_t id;
        uint32_t piece;
        auto operator<=>(const QueueKey&) const = default;
    };
    // A submitted read until its last piece lands.
    struct Read {
        ReadJob job;          // the whole read, with its current priority and weight
        uint64_t piece_size;  // pieces cover job.destination in order, piece_size bytes each
        uint32_t n_pieces;    // (the last one may be shorter)
        uint32_t queued;      // pieces not yet started
        uint32_t unfinished;
        RecordRead total;  // bytes of the landed pieces; the first error
        std::chrono::steady_clock::time_point first_start;
    };

    void run(const std::stop_token& stop);
    bool can_start() const;  // mutex_ held
    uint64_t piece_size_for(uint64_t bytes) const;
    // Piece `piece` of `read` as a job of its own.
    ReadJob piece_job(const Read& read, uint32_t piece) const;

    OnComplete on_complete_;
    bool lookahead_after_demand_;
    uint64_t piece_bytes_;
    // Guards queue_, reads_, next_id_, n_unstarted_, demand_in_flight_ and (cleared by the
    // destructor) lookahead_after_demand_.
    mutable std::mutex mutex_;
    std::condition_variable_any ready_;
    std::set<QueueKey> queue_;  // pieces not yet started, in the order they start
    std::unordered_map<uint64_t, Read> reads_;
    uint64_t next_id_ = 1;
    size_t n_unstarted_ = 0;             // reads none of whose pieces has started
    int demand_in_flight_ = 0;           // demand pieces being read
    std::vector<std::jthread> workers_;  // last: stopped and joined first
};

}  // namespace cherenkov::engine
