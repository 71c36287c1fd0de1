// Device-memory slots for routed-expert records (issue 9, "Expert pool"): one allocation of
// n_slots × slot_bytes, each slot holding one record keyed by (table layer, expert, bits), laid
// out as store::make_expert_layout says for its bits (so the store's part offsets apply inside a
// slot). The second tier of the expert cache: which slot holds what, pins, replacement (the
// --cache-policy, LRU or frequency) and the counters are engine/experts/slot_table.h's, the core
// the host cache uses too; this class adds the device memory, the copies and their fences. Slots
// acquired for the layer in flight stay pinned until released.
// A private copy stream fills slots from the host record (owned by the host ExpertSource's batch)
// and CUDA events fence reuse both ways: the compute stream waits for a slot's copy before any
// later kernel, and a copy into a slot waits for the kernels that last read it.
// Plain C++ (no CUDA types): built from device_expert_pool.cu with CUDA, or from
// unavailable.cpp without it, where construction throws Unsupported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/cuda/affine_gemv.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/expert_stats.h"
#include "engine/experts/replacement_policy.h"
#include "engine/experts/slot_table.h"
#include "store/manifest/record_layout.h"

namespace cherenkov::engine::cuda {

// One resident expert: device addresses of its three matrices (valid while the slot is pinned)
// and the shape to launch with.
struct DeviceExpert {
    ExpertAddress address{};
    ExpertShape shape;
    int32_t slot = -1;

    DeviceAffineMatrix gate() const {
        return {shape.intermediate, shape.hidden,        shape.bits,         shape.group_size,
                address.gate_codes, address.gate_scales, address.gate_biases};
    }
    DeviceAffineMatrix up() const {
        return {shape.intermediate, shape.hidden,      shape.bits,       shape.group_size,
                address.up_codes,   address.up_scales, address.up_biases};
    }
    DeviceAffineMatrix down() const {
        return {shape.hidden,       shape.intermediate,  shape.bits,         shape.group_size,
                address.down_codes, address.down_scales, address.down_biases};
    }
};

class DeviceExpertPool {
public:
    // Slots hold records of `layout`'s shapes at up to max(layout.bits, max_bits) bits (max_bits
    // > layout.bits only for a miss precision above the resident one). compute_stream: the
    // cudaStream_t the kernels reading the slots run on (nullptr: the legacy default stream).
    // policy: which unpinned slot a copy replaces (--cache-policy, as for the host cache).
    // Throws InvalidInput for n_slots < 1 and the runtime's error (naming the size) when the
    // allocation fails.
    DeviceExpertPool(const store::ExpertLayout& layout, int64_t n_slots, void* compute_stream,
                     int max_bits = 0, ReplacementKind policy = ReplacementKind::Lru);
    ~DeviceExpertPool();
    DeviceExpertPool(const DeviceExpertPool&) = delete;
    DeviceExpertPool& operator=(const DeviceExpertPool&) = delete;

    // Bytes of one slot: the used bytes of a record at the largest bits, rounded up to 256
    // (records' 4096-byte tail padding is not copied).
    static uint64_t slot_bytes_for(const store::ExpertLayout& layout, int max_bits = 0) {
        const int bits = max_bits > layout.bits ? max_bits : layout.bits;
        const store::ExpertLayout at =
            store::make_expert_layout(layout.hidden, layout.intermediate, bits, layout.group_size,
                                      layout.n_trunk_layers, layout.n_mtp_layers, layout.n_experts);
        return store::align_up(at.down.biases.end(), 256);
    }
    // Slots that fit in `bytes` of device memory (the caller decides the budget).
    static int64_t slots_for_bytes(const store::ExpertLayout& layout, uint64_t bytes,
                                   int max_bits = 0) {
        return static_cast<int64_t>(bytes / slot_bytes_for(layout, max_bits));
    }

    // Makes (table layer, expert, weights.bits) resident and pins its slot: a hit, or a copy of
    // the host record `weights` views queued on the copy stream (replacing the policy's victim
    // among unpinned slots), after which the compute stream waits for the copy before any work
    // queued later. The host record must stay alive until wait_host_copies() or finish_batch().
    // Throws ResourceExhausted when every slot is pinned, InvalidInput for unsupported bits.
    DeviceExpert acquire(int64_t layer, int32_t expert, const ExpertWeights& weights);

    // The resident record of (layer, expert, bits), pinned, as acquire() would return it on a
    // hit; nullopt when it is not resident (nothing is counted then: the later acquire() with
    // the host record counts the upload). Lets the caller skip host fetches of resident experts.
    std::optional<DeviceExpert> acquire_resident(int64_t layer, int32_t expert, int bits);
    // Makes (layer, expert, weights.bits) resident for a later layer call, unpinned: acquire()'s
    // copy without the compute stream's wait after it. That wait comes before the pool next hands
    // out a slot (acquire, acquire_resident, layer_addresses), so work queued meanwhile (the
    // layer in flight, the next layer's mixer) does not wait for it. The host record must
    // outlive the copy (a mapped table: finish_batch(false) after). Counted as an upload, and as
    // copied ahead; a later hit on the slot before it is replaced counts as used ahead.
    void copy_ahead(int64_t layer, int32_t expert, const ExpertWeights& weights);
    uint64_t copied_ahead() const { return copied_ahead_; }
    uint64_t used_ahead() const { return used_ahead_; }
    bool resident(int64_t layer, int32_t expert, int bits) const {
        return slot_of(layer, expert, bits) >= 0;
    }

    // Call after queuing (on the compute stream) every kernel that reads the slots pinned since
    // the last release: records one event there, which later copies into those slots wait for,
    // and unpins them.
    void release_pinned();

    // Blocks until every copy out of host memory queued so far has completed.
    void wait_host_copies();
    // For scope guards around a host ExpertBatch: wait_host_copies() (unless the batch's records
    // outlive it: wait_copies false) and release_pinned(), never throwing (errors are left for the
    // next checked call).
    void finish_batch(bool wait_copies = true) noexcept;

    // A whole layer routed on the device (moe.cu's resident decode), with no host round trip:
    // when the pool can hold every record at the layout's bits and all of `layer`'s experts are
    // resident at those bits, a device array [n_experts] of their addresses (uploaded on the
    // compute stream the first time it is asked for), else null. An eviction of one of the
    // layer's records unmaps it. Never call it while the compute stream is being captured.
    const ExpertAddress* layer_addresses(int64_t layer);
    // After queuing the kernels that followed layer_addresses(layer): records one release event
    // for the layer, which a copy into any of its slots waits for (as release_pinned() does for
    // pinned slots), without touching the layer's slots one by one.
    void release_layer(int64_t layer);
    // Device counter [1] that kernels routing on the device add their experts' uses to; counters()
    // reports them as hits.
    unsigned long long* device_hits() const;
    // Layers whose addresses are on the device now.
    int64_t n_layers_on_device() const;
    // The experts of `layer` not resident at the layout's bits, when the pool can hold the whole
    // table and at most `most` are missing (else empty): what completing the layer would load.
    // Empty from then on for a layer given up by leave_incomplete() (its records come at other
    // bits).
    std::vector<int32_t> missing_in_layer(int64_t layer, int64_t most) const;
    void leave_incomplete(int64_t layer);

    // Pinned host memory of at least `bytes` for one MoE call's staging (the routing read-back,
    // address tables, index lists); grows (after synchronizing the compute stream) when too small.
    // Valid until the next call; the caller may only write it where no queued copy still reads.
    void* host_staging(size_t bytes);

    void* compute_stream() const;  // the stream given at construction
    int64_t n_slots() const { return n_slots_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    uint64_t bytes() const { return static_cast<uint64_t>(n_slots_) * slot_bytes_; }
    const store::ExpertLayout& layout() const { return layout_; }
    ReplacementKind policy() const;
    // The tier's counters (misses: uploads, fill_bytes: bytes copied to the device), with the
    // hits of kernels routing on the device added (reading those synchronizes with the device).
    TierCounters counters() const;

    // Introspection for tests: the slot holding (layer, expert, bits) or -1; whether a slot is
    // pinned; a slot's bytes (synchronizes the device).
    int32_t slot_of(int64_t layer, int32_t expert, int bits) const;
    bool pinned(int32_t slot) const;
    std::vector<std::byte> read_slot(int32_t slot) const;
    // The device array layer_addresses() returned for `layer` (synchronizes the device).
    std::vector<ExpertAddress> read_layer_addresses(int64_t layer) const;

private:
    struct Impl;  // streams, events, device memory

    SlotKey key_of(int64_t layer, int32_t expert, int bits) const;
    size_t layer_of(const SlotKey& key) const;  // the table layer of a key
    const store::ExpertLayout& layout_for(int bits);
    DeviceExpert view_of(int32_t slot, int bits);
    // Pins recorded for release_pinned(): the slot goes on the list at its first pin.
    void note_pinned(uint32_t slot);
    // A copy into a slot whose record `evicted` just lost waits for the kernels of that layer.
    void fence_eviction(const SlotKey& evicted);
    // Queues the copy of `weights` into `slot`; the compute stream waits for it at once, or
    // (compute_waits false) at the next join_ahead().
    void upload(int32_t slot, const ExpertWeights& weights, bool compute_waits = true);
    // Whether slots of this pool can hold `weights` (its bits and group size).
    bool takes(const ExpertWeights& weights) const;
    // A claimed slot that missed: fences its eviction, queues the copy (upload) and counts the
    // record resident; if that throws, the slot is released (it holds no record) and it rethrows.
    void fill(const SlotTable::Claim& claim, const SlotKey& key, const ExpertWeights& weights,
              bool compute_waits);
    // The compute stream's wait for copies queued by copy_ahead, before a slot is handed out.
    void join_ahead();
    // A hit on `slot`: counts it used ahead if copy_ahead filled it and nothing read it since.
    void note_hit(uint32_t slot);
    void count_resident(const SlotKey& key, int delta);
    // Records the next release event on the compute stream and returns its generation.
    int64_t record_release();
    // The copy stream waits for release `generation` (none below 0). A generation whose ring
    // entry was recorded again waits for the oldest entry instead, never a newer one.
    void copy_waits_for(int64_t generation);
    void release_pins(int64_t release);  // the pinned slots' last readers end at `release`

    store::ExpertLayout layout_;
    int64_t n_slots_ = 0;
    uint64_t slot_bytes_ = 0;
    int max_bits_ = 0;
    std::unique_ptr<Impl> impl_;
    std::unique_ptr<SlotTable> slots_;  // what each slot holds, pins, replacement, counters
    // Per slot: the generation of the release event (Impl's ring) after the last kernels
    // reading it, or -1.
    std::vector<int64_t> slot_release_;
    std::vector<uint32_t> pinned_;                     // slots pinned since the last release
    std::vector<store::ExpertLayout> layout_by_bits_;  // [9], computed on first use
    std::vector<bool> has_layout_;                     // [9]
    // Per table layer: records resident at layout_.bits, and whether its addresses are on the
    // device (Impl::layer_map).
    std::vector<int32_t> resident_in_layer_;
    std::vector<bool> on_device_;
    std::vector<bool> left_incomplete_;
    std::vector<int64_t> layer_release_;  // per table layer: release_layer()'s generation, or -1
    bool ahead_pending_ = false;          // copy_ahead copies the compute stream has not joined
    std::vector<bool> filled_ahead_;      // per slot: filled by copy_ahead and not hit since
    uint64_t copied_ahead_ = 0;
    uint64_t used_ahead_ = 0;
};

}  // namespace cherenkov::engine::cuda
