#include "engine/experts/expert_cache.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "engine/experts/expert_cache_batch.h"

namespace cherenkov::engine {
namespace {

uint64_t slot_bytes_for(const ExpertCacheOptions& options) {
    uint64_t bytes = 0;
    for (const int bits : {options.resident_bits, options.miss_bits}) {
        const auto found = options.tables.find(bits == 0 ? options.resident_bits : bits);
        if (found != options.tables.end()) {
            bytes = std::max(bytes, found->second.layout.record_bytes);
        }
    }
    return bytes == 0 ? store::kRecordAlign : store::align_up(bytes, store::kRecordAlign);
}

const store::ExpertLayout& layout_of(const ExpertCacheOptions& options, int bits) {
    const auto found = options.tables.find(bits);
    if (found == options.tables.end()) {
        throw_invalid("expert cache: no Q" + std::to_string(bits) + " expert table given (experts" +
                      (bits == 4 ? "" : std::to_string(bits)) + ".bin)");
    }
    return found->second.layout;
}

}  // namespace

ExpertCache::ExpertCache(ExpertCacheOptions options)
    : options_(std::move(options)),
      tables_(kExpertBits.size()),
      pool_(options_.n_slots, slot_bytes_for(options_),
            options_.prefault_pool ? SlotPool::Pages::Prefault : SlotPool::Pages::Lazy),
      slots_(options_.n_slots),
      slot_table_(options_.n_slots, layout_of(options_, options_.resident_bits).n_records(),
                  options_.policy, options_.frequency_half_life_selections) {
    if (options_.miss_bits == 0) options_.miss_bits = options_.resident_bits;
    validate_and_open();
    const store::ExpertLayout& resident = tables_[static_cast<size_t>(resident_table_)].layout;
    lookahead_.resize(static_cast<size_t>(resident.n_layers()));
    marks_.assign(static_cast<size_t>(resident.n_experts), 0);
    stats_ = ExpertStats(resident.n_layers(), resident.n_experts);
    io_ = std::make_unique<ExpertIo>(
        options_.n_io_threads,
        [this](const ReadJob& job, const RecordRead& read, uint64_t duration_ns) {
            on_read_complete(job, read, duration_ns);
        },
        options_.lookahead_after_demand, options_.io_piece_bytes);
}

ExpertCache::~ExpertCache() {
    io_.reset();
}

void ExpertCache::validate_and_open() {
    if (options_.n_slots == 0) throw_invalid("expert cache needs at least one slot");
    resident_table_ = precision_index(options_.resident_bits);
    miss_table_ = precision_index(options_.miss_bits);
    if (miss_table_ != resident_table_ && options_.miss_bits > options_.resident_bits) {
        throw_invalid("expert cache: miss precision Q" + std::to_string(options_.miss_bits) +
                      " is above the resident precision Q" +
                      std::to_string(options_.resident_bits));
    }
    const store::ExpertLayout& resident = layout_of(options_, options_.resident_bits);
    const RecordReaderFactory open =
        options_.open_reader ? options_.open_reader : RecordReaderFactory(open_file_record_reader);
    for (const int bits : {options_.resident_bits, options_.miss_bits}) {
        Table& table = tables_[static_cast<size_t>(precision_index(bits))];
        if (table.present) continue;
        layout_of(options_, bits);  // throws InvalidInput naming a missing table
        const ExpertTable& given = options_.tables.at(bits);
        const store::ExpertLayout& layout = given.layout;
        if (layout.bits != bits || layout.n_layers() != resident.n_layers() ||
            layout.n_experts != resident.n_experts || layout.hidden != resident.hidden ||
            layout.intermediate != resident.intermediate) {
            throw_invalid(given.path + ": its Q" + std::to_string(layout.bits) +
                          " expert layout does not match the Q" + std::to_string(bits) +
                          " slot of a table with " + std::to_string(resident.n_layers()) +
                          " layers of " + std::to_string(resident.n_experts) + " experts");
        }
        table.reader = open(given.path, options_.direct_io);
        if (table.reader->size_bytes() != layout.file_bytes()) {
            throw_corrupt(given.path + ": size " + std::to_string(table.reader->size_bytes()) +
                          " bytes, the expert layout needs " + std::to_string(layout.file_bytes()));
        }
        table.present = true;
        table.bits = bits;
        table.path = given.path;
        table.layout = layout;
    }
}

const store::ExpertLayout& ExpertCache::layout() const {
    return tables_[static_cast<size_t>(resident_table_)].layout;
}

bool ExpertCache::direct_io() const {
    return tables_[static_cast<size_t>(resident_table_)].reader->direct();
}

void ExpertCache::validate_layer(int64_t layer) const {
    if (layer < 0 || layer >= layout().n_layers()) {
        throw_invalid("expert layer " + std::to_string(layer) + " outside the table's " +
                      std::to_string(layout().n_layers()) + " layers");
    }
}

uint64_t ExpertCache::record_key(int64_t layer, int32_t expert) const {
    return layout().record_index(layer, expert);
}

SlotKey ExpertCache::slot_key(int table, int64_t layer, int32_t expert) const {
    return SlotKey{.record = record_key(layer, expert),
                   .bits = tables_[static_cast<size_t>(table)].bits};
}

int32_t ExpertCache::find_slot(int64_t layer, int32_t expert) const {
    const int32_t resident = slot_table_.find(slot_key(resident_table_, layer, expert));
    if (resident >= 0 || miss_table_ == resident_table_) return resident;
    return slot_table_.find(slot_key(miss_table_, layer, expert));
}

int ExpertCache::table_for_miss(int64_t layer, int32_t expert) const {
    if (miss_table_ == resident_table_) return resident_table_;
    // Mixed mode: a miss the lookahead predicted reads at resident precision (it was meant to be
    // kept); an unpredicted miss reads the smaller record just in time. marks_ holds the
    // prediction while fetch runs.
    const LayerLookahead& lookahead = lookahead_[static_cast<size_t>(layer)];
    if (lookahead.has_prediction && (marks_[static_cast<size_t>(expert)] & kMarkPredicted) != 0) {
        return resident_table_;
    }
    return miss_table_;
}

ExpertResidency ExpertCache::residency(int64_t layer, int32_t expert) const {
    std::lock_guard lock(mutex_);
    validate_layer(layer);
    const int32_t slot = find_slot(layer, expert);
    if (slot < 0) return {};
    const Slot& s = slots_[static_cast<size_t>(slot)];
    return ExpertResidency{.slot = slot,
                           .bits = tables_[static_cast<size_t>(s.table)].bits,
                           .resident = s.state == SlotState::Ready};
}

ExpertStats ExpertCache::stats() const {
    std::lock_guard lock(mutex_);
    ExpertStats copy = stats_;
    copy.slots = slot_table_.counters();
    return copy;
}

ExpertSourceFigures ExpertCache::figures() const {
    ExpertSourceFigures out;
    out.cache = stats();
    for (const PrecisionCounters& q : out.cache->total().quant)
        out.read_bytes += q.demand.completed_bytes + q.prefetch.completed_bytes;
    return out;
}

void ExpertCache::begin_step() {
    std::lock_guard lock(mutex_);
    issue_staged_lookahead();
    ++stats_.steps;
}

void ExpertCache::end_step() {
    std::lock_guard lock(mutex_);
    issue_staged_lookahead();
}

void ExpertCache::wait_idle() {
    std::unique_lock lock(mutex_);
    issue_staged_lookahead();
    landed_.wait(lock, [this] { return reads_pending_ == 0; });
}

void ExpertCache::check_requests(std::span<const ExpertRequest> requests) {
    for (size_t index = 0; index < requests.size(); ++index) {
        const int32_t expert = requests[index].expert;
        if (expert < 0 || expert >= layout().n_experts) {
            for (size_t done = 0; done < index; ++done) {
                marks_[static_cast<size_t>(requests[done].expert)] = 0;
            }
            throw_invalid("expert " + std::to_string(expert) + " outside [0, " +
                          std::to_string(layout().n_experts) + ")");
        }
        uint8_t& mark = marks_[static_cast<size_t>(expert)];
        if ((mark & kMarkRequested) != 0) {
            for (size_t done = 0; done < index; ++done) {
                marks_[static_cast<size_t>(requests[done].expert)] = 0;
            }
            throw_invalid("expert " + std::to_string(expert) + " requested twice in one fetch");
        }
        mark |= kMarkRequested;
    }
}

void ExpertCache::clear_marks(std::span<const ExpertRequest> requests, int64_t layer) {
    for (const ExpertRequest& request : requests) marks_[static_cast<size_t>(request.expert)] = 0;
    for (const int32_t expert : lookahead_[static_cast<size_t>(layer)].predicted) {
        marks_[static_cast<size_t>(expert)] = 0;
    }
}

bool ExpertCache::serve_found(ExpertCacheBatch& batch, int64_t layer, size_t request_index,
                              const ExpertRequest& request) {
    const int32_t found = find_slot(layer, request.expert);
    if (found < 0) return false;
    const auto slot = static_cast<uint32_t>(found);
    Slot& s = slots_[slot];
    ExpertCounters& expert_stats = stats_.expert(layer, request.expert);
    LayerCounters& layer_stats = stats_.layer(layer);
    slot_table_.pin(slot);
    const bool ready = s.state == SlotState::Ready;
    if (s.speculative) {
        // A lookahead read this fetch now claims: used, and urgent if still queued.
        s.speculative = false;
        ++expert_stats.prefetches_used;
        ++layer_stats.experts.prefetches_used;
        if (!ready) io_->promote(s.job_id, request.max_weight);
    }
    slot_table_.touch(slot);
    if (ready) {
        slot_table_.count_hit();
    } else {
        slot_table_.count_miss();
    }
    ++(ready ? expert_stats.hits : expert_stats.misses);
    ++(ready ? layer_stats.experts.hits : layer_stats.experts.misses);
    PrecisionCounters& quant = layer_stats.quant[static_cast<size_t>(s.table)];
    ++quant.selected_experts;
    if (!ready && is_weak(request)) ++quant.eligible_weak_misses;
    batch.add(request_index, slot, request.max_weight, ready);
    return true;
}

void ExpertCache::serve_miss(ExpertCacheBatch& batch, std::unique_lock<std::mutex>& lock,
                             int64_t layer, size_t request_index, const ExpertRequest& request) {
    while (!serve_found(batch, layer, request_index, request)) {
        if (const std::optional<uint32_t> slot = take_slot(true)) {
            const int table = table_for_miss(layer, request.expert);
            start_read(*slot, table, layer, request.expert, ReadPriority::Demand,
                       request.max_weight);
            slot_table_.pin(*slot);
            slot_table_.count_miss();
            ++stats_.expert(layer, request.expert).misses;
            LayerCounters& layer_stats = stats_.layer(layer);
            ++layer_stats.experts.misses;
            PrecisionCounters& quant = layer_stats.quant[static_cast<size_t>(table)];
            ++quant.selected_experts;
            if (is_weak(request)) ++quant.eligible_weak_misses;
            batch.add(request_index, *slot, request.max_weight, false);
            return;
        }
        // Every slot is pinned or loading: wait for an unpinned read (lookahead, or a demand read
        // of a batch already destroyed) to land, then evict it.
        if (!unpinned_reads_in_flight()) {
            throw Error(ErrorKind::ResourceExhausted,
                        "expert pool of " + std::to_string(slots_.size()) +
                            " slots is full of pinned experts: cannot fetch layer " +
                            std::to_string(layer) + " expert " + std::to_string(request.expert) +
                            " (destroy each layer's batch before fetching the next, or use a "
                            "larger pool)");
        }
        landed_.wait(lock);
    }
}

std::unique_ptr<ExpertBatch> ExpertCache::fetch(int64_t layer,
                                                std::span<const ExpertRequest> requests) {
    validate_layer(layer);
    // Declared before the lock: if fetch throws, the lock is released before the batch unpins.
    auto batch = std::make_unique<ExpertCacheBatch>(*this, layer, requests.size());
    std::unique_lock lock(mutex_);
    ++live_batches_;  // the batch's destructor counts it out, also when fetch throws
    check_requests(requests);
    record_prediction(layer, requests);
    try {
        ++stats_.layer(layer).batches;
        // Pin everything already in the pool first, so no miss evicts an expert of this batch.
        pending_misses_.clear();
        for (size_t index = 0; index < requests.size(); ++index) {
            const ExpertRequest& request = requests[index];
            slot_table_.record_selection(record_key(layer, request.expert));
            ++stats_.expert(layer, request.expert).selections;
            ++stats_.layer(layer).experts.selections;
            if (!serve_found(*batch, layer, index, request)) pending_misses_.push_back(index);
        }
        // Strongest first: an idle worker starts the first read before the rest are queued.
        std::stable_sort(pending_misses_.begin(), pending_misses_.end(), [&](size_t a, size_t b) {
            return requests[a].max_weight > requests[b].max_weight;
        });
        // Few misses (a decode layer's): idle IO threads read pieces of them, and of the
        // lookahead reads issued after this fetch; many (a prefill chunk's): each read whole.
        split_reads_ = pending_misses_.size() <= static_cast<size_t>(io_->n_threads());
        for (const size_t index : pending_misses_) {
            serve_miss(*batch, lock, layer, index, requests[index]);
        }
        drop_stale_lookahead(layer);
    } catch (...) {
        finish_fetch(requests, layer);
        throw;
    }
    finish_fetch(requests, layer);
    issue_staged_lookahead();
    return batch;
}

void ExpertCache::finish_fetch(std::span<const ExpertRequest> requests, int64_t layer) {
    clear_marks(requests, layer);
    LayerLookahead& lookahead = lookahead_[static_cast<size_t>(layer)];
    lookahead.has_prediction = false;
    lookahead.predicted.clear();
}

void ExpertCache::release_slot(uint32_t slot) {
    slot_table_.release(slot);
    slots_[slot] = Slot{};
}

void ExpertCache::forget(uint32_t slot) {
    slot_table_.unmap(slot);
    slots_[slot] = Slot{};
}

std::optional<uint32_t> ExpertCache::take_slot(bool demand, int64_t protected_layer) {
    const std::optional<SlotTable::Taken> taken = slot_table_.take([&](uint32_t slot) {
        const Slot& s = slots_[slot];
        if (s.state != SlotState::Ready) return false;
        return !(s.speculative && s.layer == protected_layer);
    });
    if (taken) {
        slots_[taken->slot] = Slot{};
        return taken->slot;
    }
    if (!demand) return std::nullopt;
    // A demand miss may take the slot of a lookahead read that has not started.
    for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
        Slot& s = slots_[slot];
        if (s.state != SlotState::Loading || !s.speculative || slot_table_.pins(slot) != 0) {
            continue;
        }
        if (!io_->cancel(s.job_id)) continue;
        --reads_pending_;
        ++stats_.layer(s.layer).prefetches_dropped;
        forget(slot);
        return slot;
    }
    return std::nullopt;
}

bool ExpertCache::unpinned_reads_in_flight() const {
    for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
        if (slots_[slot].state == SlotState::Loading && slot_table_.pins(slot) == 0) return true;
    }
    return false;
}

void ExpertCache::start_read(uint32_t slot, int table_index, int64_t layer, int32_t expert,
                             ReadPriority priority, float weight) {
    Table& table = tables_[static_cast<size_t>(table_index)];
    Slot& s = slots_[slot];
    s.state = SlotState::Loading;
    s.table = table_index;
    s.layer = static_cast<int32_t>(layer);
    s.expert = expert;
    s.read_as_lookahead = priority == ReadPriority::Lookahead;
    s.speculative = s.read_as_lookahead;
    // Ranked when requested, not when the read lands, so eviction order does not depend on IO
    // timing; a loading slot is never a victim.
    slot_table_.assign(slot, slot_key(table_index, layer, expert), s.speculative);
    PrecisionCounters& quant = stats_.layer(layer).quant[static_cast<size_t>(table_index)];
    (s.read_as_lookahead ? quant.prefetch : quant.demand).requested_bytes +=
        table.layout.record_bytes;
    ++reads_pending_;
    s.job_id = io_->submit(ReadJob{
        .id = 0,
        .priority = priority,
        .weight = weight,
        .reader = table.reader.get(),
        .destination = pool_.slot_span(slot, table.layout.record_bytes),
        .offset = table.layout.record_offset(layer, expert),
        .slot = slot,
        .may_split = split_reads_,
    });
}

std::string ExpertCache::describe_record(const Slot& s) const {
    const Table& table = tables_[static_cast<size_t>(s.table)];
    return "expert record layer " + std::to_string(s.layer) + " expert " +
           std::to_string(s.expert) + " (Q" + std::to_string(table.bits) + ") in " + table.path +
           " at byte " + std::to_string(table.layout.record_offset(s.layer, s.expert)) + " (" +
           std::to_string(table.layout.record_bytes) + " bytes)";
}

void ExpertCache::on_read_complete(const ReadJob& job, const RecordRead& read,
                                   uint64_t duration_ns) {
    {
        std::lock_guard lock(mutex_);
        Slot& s = slots_[job.slot];
        const Table& table = tables_[static_cast<size_t>(s.table)];
        PrecisionCounters& quant = stats_.layer(s.layer).quant[static_cast<size_t>(s.table)];
        ReadCounters& reads = s.read_as_lookahead ? quant.prefetch : quant.demand;
        reads.completed_bytes += read.n_bytes;
        reads.read_ns_sum += duration_ns;
        reads.read_ns_max = std::max(reads.read_ns_max, duration_ns);
        --reads_pending_;
        if (read.error_number == 0 && read.n_bytes == table.layout.record_bytes) {
            ++reads.reads_ok;
            slot_table_.count_fill(read.n_bytes);
            s.state = SlotState::Ready;
            s.landed_seq = ++landed_seq_;
        } else {
            ++reads.reads_failed;
            s.error = describe_record(s) + ": " +
                      (read.error_number != 0
                           ? std::string("read failed: ") + std::strerror(read.error_number)
                           : "short read: " + std::to_string(read.n_bytes) + " of " +
                                 std::to_string(table.layout.record_bytes) + " bytes");
            s.state = SlotState::Failed;
            slot_table_.unmap(job.slot);
            if (slot_table_.pins(job.slot) == 0) release_slot(job.slot);
        }
    }
    landed_.notify_all();
}

void ExpertCache::unpin(uint32_t slot) {
    slot_table_.unpin(slot);
    if (slot_table_.pins(slot) == 0 && slots_[slot].state == SlotState::Failed) {
        release_slot(slot);
    }
}

}  // namespace cherenkov::engine
