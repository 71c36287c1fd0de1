// Where the forward pass gets routed experts from. The engine asks, per step and layer, for the
// union of experts its rows selected; the source makes their records available (from a cache, or
// by reading the store) and hands them back one by one as they become ready, so compute on
// resident experts overlaps the reads of missing ones. Implementations: DirectExpertReader (no
// cache: every request is a read) and the bounded expert cache of the expert-streaming issue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "engine/cpu/affine_matrix.h"
#include "engine/experts/expert_stats.h"
#include "store/manifest/record_layout.h"

namespace cherenkov::engine {

// Views of one expert's three projections inside a record.
struct ExpertWeights {
    AffineMatrix gate;  // [I, H]
    AffineMatrix up;    // [I, H]
    AffineMatrix down;  // [H, I]
    int bits = 4;
};

// Views into a record laid out as `layout` says (docs/store-format.md). `record` must hold
// layout.record_bytes bytes and outlive the views.
ExpertWeights expert_weights_in_record(const std::byte* record, const store::ExpertLayout& layout);

// One entry of a layer's request: an expert and the largest routing weight any row gave it
// (sources use it to order reads: strongest first).
struct ExpertRequest {
    int32_t expert = 0;
    float max_weight = 0.0F;
};

// The experts of one layer for one step. The records stay valid (and their slots pinned) until
// the batch is destroyed.
class ExpertBatch {
public:
    virtual ~ExpertBatch() = default;
    // Blocks until one more requested expert is ready; sets its index in the request and its
    // weights. Returns false once every expert has been delivered. Residents come first, then
    // misses in the order their reads complete. Throws on a read error.
    virtual bool next(size_t* request_index, ExpertWeights* weights) = 0;

    // Whether next() would return now, without waiting for a read: a record is ready, or none is
    // left. false when unknown. Lets a consumer batch the records at hand and compute them before
    // it would otherwise sit waiting.
    virtual bool ready() const { return false; }

    // Request indices skipped by cut_weak (the expert cache's option); meaningful once next()
    // has returned false. Their reads finish in the background. Empty for other sources.
    virtual std::span<const size_t> cut_requests() const { return {}; }
};

// What a source has done so far, for one engine observation (engine_stats.h).
struct ExpertSourceFigures {
    // Completed expert-read bytes: read from the table, or handed out in place by a mapping.
    uint64_t read_bytes = 0;
    std::optional<ExpertStats> cache{};  // a cache's counters; none for a source without one
};

// A source's record region. read_only: the memory must not be written (a read-only mapping), so
// a device backend registers it as memory the device only reads.
struct RecordMemory {
    std::span<const std::byte> bytes;
    bool read_only = false;
};

class ExpertSource {
public:
    virtual ~ExpertSource() = default;

    // The table layout (bits of the resident precision, shapes, record size).
    virtual const store::ExpertLayout& layout() const = 0;

    // Starts making the requested experts of `layer` (a table layer: MTP layers follow the
    // trunk) available. `requests` must be distinct experts in [0, n_experts).
    virtual std::unique_ptr<ExpertBatch> fetch(int64_t layer,
                                               std::span<const ExpertRequest> requests) = 0;

    // Lookahead hint: `layer` is predicted to use `experts` soon; a source may start background
    // reads. Never changes what fetch delivers.
    virtual void predict(int64_t /*layer*/, std::span<const int32_t> /*experts*/) {}

    // The most experts one fetch may request (a bounded pool pins every expert of a live batch).
    // Larger unions, as in prefill, are fetched in groups of at most this many.
    virtual size_t max_batch_experts() const { return SIZE_MAX; }

    // The host memory every delivered record lies in, when the source has one fixed region (the
    // expert cache's pool, a mapped table), so a device backend can page-lock it once and copy
    // records out with DMA; empty otherwise.
    virtual RecordMemory record_memory() const { return {}; }

    // Whether delivered records stay valid after their batch is destroyed (a mapped table's
    // do), so a device backend need not wait for its copies out of them before it goes on.
    virtual bool records_outlive_batches() const { return false; }

    // The source's figures now. Safe to call while fetches run (counters are read atomically
    // or under the source's lock).
    virtual ExpertSourceFigures figures() const = 0;

    // Bracket one forward call (a token step: all layers, all rows), for per-step accounting.
    virtual void begin_step() {}
    virtual void end_step() {}
};

}  // namespace cherenkov::engine
