// The bounded expert cache (seed "Expert cache", "Speculative routing", "Expert policy"): a pool
// of host-memory slots, one record each, mapped from (layer, expert, precision). fetch() pins the
// requested experts' slots for the life of the batch, hands out residents at once and each miss
// as its read lands; IO workers read missing records straight into free slots (demand before
// lookahead, strongest first). predict() starts low-priority lookahead reads that never evict a
// pinned slot; when their layer is fetched without them, queued ones are dropped and landed ones
// become stale. Which slot holds what, pins and replacement (LRU or frequency-aware, stale
// prefetches first) are the slot table's (slot_table.h), the core the device tier shares.
//
// Threads: fetch/predict/begin_step/end_step and batches belong to the engine thread; IO
// workers complete reads. One mutex guards the slot table; it is never held across a read.
// Batches must be destroyed before the cache.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/experts/block_address_table.h"
#include "engine/experts/expert_cache_options.h"
#include "engine/experts/expert_io.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/expert_stats.h"
#include "engine/experts/slot_pool.h"
#include "engine/experts/slot_table.h"

namespace cherenkov::engine {

class ExpertCacheBatch;

class ExpertCache final : public ExpertSource {
public:
    // Opens the tables (file sizes must match their layouts), maps the pool and starts the IO
    // workers. Throws InvalidInput for inconsistent options, NotFound/Corrupt for tables.
    explicit ExpertCache(ExpertCacheOptions options);
    ~ExpertCache() override;
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    const store::ExpertLayout& layout() const override;
    std::unique_ptr<ExpertBatch> fetch(int64_t layer,
                                       std::span<const ExpertRequest> requests) override;
    void predict(int64_t layer, std::span<const int32_t> experts) override;
    void begin_step() override;
    void end_step() override;
    // The counters, and the bytes of completed reads at every precision.
    ExpertSourceFigures figures() const override;

    // Copy of the counters.
    ExpertStats stats() const;
    // Where (layer, expert) is now: a ready record at any precision (resident), a read in flight
    // (slot set, not resident), or no slot.
    ExpertResidency residency(int64_t layer, int32_t expert) const;
    // Blocks until no read is queued or in flight (tests and benchmarks).
    void wait_idle();

    uint64_t n_slots() const { return pool_.n_slots(); }
    size_t max_batch_experts() const override { return static_cast<size_t>(pool_.n_slots()); }
    RecordMemory record_memory() const override { return RecordMemory{.bytes = pool_.memory()}; }
    uint64_t slot_bytes() const { return pool_.slot_bytes(); }
    const std::byte* slot_data(uint32_t slot) const { return pool_.slot(slot); }
    // True when the resident table's reads bypass the page cache.
    bool direct_io() const;

private:
    friend class ExpertCacheBatch;

    enum class SlotState : uint8_t { Free, Loading, Ready, Failed };

    struct Slot {
        SlotState state = SlotState::Free;
        int table = -1;  // precision_index of the record's table
        int32_t layer = -1;
        int32_t expert = -1;
        bool speculative = false;  // filled by lookahead, not yet claimed by a fetch
        bool read_as_lookahead = false;
        uint64_t job_id = 0;      // while Loading
        uint64_t landed_seq = 0;  // order in which reads completed
        std::string error;        // Failed: what went wrong, naming the record
    };

    struct Table {
        bool present = false;
        int bits = 0;
        std::string path;
        store::ExpertLayout layout;
        std::unique_ptr<RecordReader> reader;
    };

    // Per layer: the latest prediction not yet consumed by a fetch, and the slots of lookahead
    // reads issued for the layer.
    struct LayerLookahead {
        bool has_prediction = false;
        std::vector<int32_t> predicted;
        std::vector<uint32_t> read_slots;
    };

    // marks_ bits while one fetch or predict runs.
    static constexpr uint8_t kMarkRequested = 1;
    static constexpr uint8_t kMarkPredicted = 2;
    static constexpr uint8_t kMarkSeen = 4;

    void validate_and_open();
    void check_requests(std::span<const ExpertRequest> requests);
    void clear_marks(std::span<const ExpertRequest> requests, int64_t layer);
    // Pins the request's slot when (layer, expert) is in the pool (ready or loading).
    bool serve_found(ExpertCacheBatch& batch, int64_t layer, size_t request_index,
                     const ExpertRequest& request);
    // Takes a slot and starts a demand read, waiting for lookahead reads to land if need be.
    void serve_miss(ExpertCacheBatch& batch, std::unique_lock<std::mutex>& lock, int64_t layer,
                    size_t request_index, const ExpertRequest& request);
    void finish_fetch(std::span<const ExpertRequest> requests, int64_t layer);
    bool is_weak(const ExpertRequest& request) const {
        return options_.cut_weak > 0.0F && request.max_weight < options_.cut_weak;
    }
    void validate_layer(int64_t layer) const;
    int table_for_miss(int64_t layer, int32_t expert) const;
    // Slot holding (layer, expert) at any precision (resident table first), or -1.
    int32_t find_slot(int64_t layer, int32_t expert) const;
    uint64_t record_key(int64_t layer, int32_t expert) const;
    // The slot table's key of (layer, expert) in the table of precision_index `table`.
    SlotKey slot_key(int table, int64_t layer, int32_t expert) const;

    // A slot for a new record: free, else the policy's victim among unpinned ready slots (never
    // a pending prefetch of protected_layer); for demand also a cancelled queued lookahead read.
    // nullopt when none is available now.
    std::optional<uint32_t> take_slot(bool demand, int64_t protected_layer = -1);
    void forget(uint32_t slot);        // no record any more (a cancelled read); not freed
    void release_slot(uint32_t slot);  // back to the free list
    void start_read(uint32_t slot, int table, int64_t layer, int32_t expert, ReadPriority priority,
                    float weight);
    bool unpinned_reads_in_flight() const;
    void record_prediction(int64_t layer, std::span<const ExpertRequest> requests);
    void issue_lookahead(int64_t layer);
    void issue_staged_lookahead();
    void drop_stale_lookahead(int64_t layer);

    void on_read_complete(const ReadJob& job, const RecordRead& read, uint64_t duration_ns);
    std::string describe_record(const Slot& slot) const;
    void unpin(uint32_t slot);  // by a batch's destructor, lock held

    ExpertCacheOptions options_;
    int resident_table_ = 0;  // precision_index
    int miss_table_ = 0;
    std::vector<Table> tables_;  // [3], by precision_index
    SlotPool pool_;

    mutable std::mutex mutex_;        // guards everything below
    std::condition_variable landed_;  // a read completed (or failed)
    std::vector<Slot> slots_;
    SlotTable slot_table_;  // records held, pins (live batches using a slot), replacement
    std::vector<LayerLookahead> lookahead_;  // [n_layers]
    std::vector<uint8_t> marks_;             // [n_experts] scratch for one fetch / predict
    std::vector<size_t> pending_misses_;     // scratch: request indices not in the pool
    bool split_reads_ = false;               // set by each fetch: reads may be cut in pieces
    ExpertStats stats_;
    uint64_t landed_seq_ = 0;
    uint64_t reads_pending_ = 0;  // queued or in flight
    uint32_t live_batches_ = 0;
    std::vector<int64_t> staged_layers_;  // predicted layers whose reads wait for the next fetch

    std::unique_ptr<ExpertIo> io_;  // last: stopped first
};

}  // namespace cherenkov::engine
