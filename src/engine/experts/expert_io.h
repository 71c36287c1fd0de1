// IO workers for expert records: a priority queue of reads and a pool of threads, each with one
// read in flight, reading straight into pool slots. Demand reads always go before lookahead
// reads; within a class the stronger expert (larger max routing weight) goes first, then the
// older request. By default a lookahead read starts only while no demand read is queued or in
// flight, so it never takes disk bandwidth from a read the engine is waiting for (seed: lookahead
// reads start after the current block's required misses finish). Queued reads can be promoted
// (a fetch needs a predicted expert now) or cancelled (a lookahead read no longer wanted);
// started reads always run to completion.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
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
};

class ExpertIo {
public:
    // Called on an IO thread after each read, with no ExpertIo lock held. Must not throw.
    using OnComplete =
        std::function<void(const ReadJob& job, const RecordRead& read, uint64_t duration_ns)>;

    // lookahead_after_demand: hold lookahead reads while demand reads are queued or in flight.
    ExpertIo(int n_threads, OnComplete on_complete, bool lookahead_after_demand = true);
    // Drops queued reads (their handlers never run) and waits for reads in flight.
    ~ExpertIo();
    ExpertIo(const ExpertIo&) = delete;
    ExpertIo& operator=(const ExpertIo&) = delete;

    // Queues a read and returns its id.
    uint64_t submit(ReadJob job);
    // Raises a queued read to Demand priority with `weight`. False when it has already started.
    bool promote(uint64_t id, float weight);
    // Removes a queued read. False when it has already started (its handler will run).
    bool cancel(uint64_t id);

    int n_threads() const { return static_cast<int>(workers_.size()); }
    size_t n_queued() const;

private:
    struct QueueKey {
        ReadPriority priority;
        float negative_weight;
        uint64_t id;
        auto operator<=>(const QueueKey&) const = default;
    };

    void run(const std::stop_token& stop);
    bool can_start() const;  // mutex_ held

    OnComplete on_complete_;
    bool lookahead_after_demand_;
    mutable std::mutex mutex_;  // guards queue_, keys_, next_id_, demand_in_flight_
    std::condition_variable_any ready_;
    std::map<QueueKey, ReadJob> queue_;
    std::unordered_map<uint64_t, QueueKey> keys_;  // queued ids
    uint64_t next_id_ = 1;
    int demand_in_flight_ = 0;
    std::vector<std::jthread> workers_;  // last: stopped and joined first
};

}  // namespace cherenkov::engine
