// DeviceExpertPool (device_expert_pool.h): slot bookkeeping by the shared SlotTable on the host,
// copies on a private stream, fences by CUDA events. Release events come from a ring: a slot
// remembers the ring entry recorded after its last readers; should that entry be recorded again
// later (64 releases on), waiting on it waits for later compute-stream work, which is conservative,
// never unsafe.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <string>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/device_expert_pool.h"

namespace cherenkov::engine::cuda {

namespace {

constexpr int kMaxBits = SlotTable::kMaxBits;
constexpr int kReleaseRing = 64;

}  // namespace

struct DeviceExpertPool::Impl {
    cudaStream_t compute = nullptr;
    cudaStream_t copy = nullptr;
    cudaEvent_t copy_done = nullptr;
    std::array<cudaEvent_t, kReleaseRing> release{};
    // The generation each ring entry was last recorded for, and the next generation's number.
    std::array<int64_t, kReleaseRing> recorded{};
    int64_t next_generation = 0;
    std::byte* memory = nullptr;  // [n_slots, slot_bytes]
    void* staging = nullptr;      // pinned host
    size_t staging_bytes = 0;
    ExpertAddress* layer_map = nullptr;  // [n_layers, n_experts], allocated on first use
    unsigned long long* device_hits = nullptr;

    ~Impl() {
        // Never throws: pending copies finish before the memory goes.
        if (copy != nullptr) cudaStreamSynchronize(copy);
        if (staging != nullptr) cudaFreeHost(staging);
        if (memory != nullptr) cudaFree(memory);
        if (layer_map != nullptr) cudaFree(layer_map);
        if (device_hits != nullptr) cudaFree(device_hits);
        for (cudaEvent_t e : release) {
            if (e != nullptr) cudaEventDestroy(e);
        }
        if (copy_done != nullptr) cudaEventDestroy(copy_done);
        if (copy != nullptr) cudaStreamDestroy(copy);
    }
};

DeviceExpertPool::DeviceExpertPool(const store::ExpertLayout& layout, int64_t n_slots,
                                   void* compute_stream, int max_bits, ReplacementKind policy)
    : layout_(layout),
      n_slots_(n_slots),
      max_bits_(max_bits > layout.bits ? max_bits : layout.bits),
      impl_(std::make_unique<Impl>()) {
    if (n_slots < 1 || n_slots > (int64_t{1} << 30)) {
        throw_invalid("[device_expert_pool] n_slots " + std::to_string(n_slots) +
                      " (expected at least 1)");
    }
    if (max_bits_ > kMaxBits) {
        throw_invalid("[device_expert_pool] bits " + std::to_string(max_bits_));
    }
    slot_bytes_ = slot_bytes_for(layout, max_bits);
    impl_->compute = static_cast<cudaStream_t>(compute_stream);
    CHERENKOV_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->copy, cudaStreamNonBlocking));
    CHERENKOV_CUDA_CHECK(cudaEventCreateWithFlags(&impl_->copy_done, cudaEventDisableTiming));
    for (cudaEvent_t& e : impl_->release) {
        CHERENKOV_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    void* memory = nullptr;
    const cudaError_t status = cudaMalloc(&memory, bytes());
    if (status != cudaSuccess) {
        throw_internal("[device_expert_pool] cudaMalloc of " + std::to_string(n_slots) + " × " +
                       std::to_string(slot_bytes_) + " bytes: " + cudaGetErrorString(status));
    }
    impl_->memory = static_cast<std::byte*>(memory);
    CHERENKOV_CUDA_CHECK(cudaMalloc(&impl_->device_hits, sizeof(unsigned long long)));
    CHERENKOV_CUDA_CHECK(cudaMemset(impl_->device_hits, 0, sizeof(unsigned long long)));
    resident_in_layer_.assign(static_cast<size_t>(layout.n_layers()), 0);
    on_device_.assign(static_cast<size_t>(layout.n_layers()), false);
    left_incomplete_.assign(static_cast<size_t>(layout.n_layers()), false);
    layer_release_.assign(static_cast<size_t>(layout.n_layers()), -1);
    slots_ =
        std::make_unique<SlotTable>(static_cast<uint64_t>(n_slots), layout.n_records(), policy);
    slot_release_.assign(static_cast<size_t>(n_slots), -1);
    filled_ahead_.assign(static_cast<size_t>(n_slots), false);
    layout_by_bits_.resize(kMaxBits + 1);
    has_layout_.assign(kMaxBits + 1, false);
}

DeviceExpertPool::~DeviceExpertPool() = default;

SlotKey DeviceExpertPool::key_of(int64_t layer, int32_t expert, int bits) const {
    if (layer < 0 || layer >= layout_.n_layers() || expert < 0 || expert >= layout_.n_experts ||
        bits < 1 || bits > kMaxBits) {
        throw_invalid("[device_expert_pool] no record (layer " + std::to_string(layer) +
                      ", expert " + std::to_string(expert) + ", " + std::to_string(bits) +
                      " bits)");
    }
    return SlotKey{.record = layout_.record_index(layer, expert), .bits = bits};
}

const store::ExpertLayout& DeviceExpertPool::layout_for(int bits) {
    const auto b = static_cast<size_t>(bits);
    if (!has_layout_[b]) {
        layout_by_bits_[b] = bits == layout_.bits ? layout_
                                                  : store::make_expert_layout(
                                                        layout_.hidden, layout_.intermediate, bits,
                                                        layout_.group_size, layout_.n_trunk_layers,
                                                        layout_.n_mtp_layers, layout_.n_experts);
        has_layout_[b] = true;
    }
    return layout_by_bits_[b];
}

DeviceExpert DeviceExpertPool::view_of(int32_t slot, int bits) {
    const store::ExpertLayout& l = layout_for(bits);
    const std::byte* base = impl_->memory + static_cast<uint64_t>(slot) * slot_bytes_;
    const auto codes = [&](const store::ByteRange& r) {
        return reinterpret_cast<const uint8_t*>(base + r.offset);
    };
    const auto halves = [&](const store::ByteRange& r) {
        return reinterpret_cast<const uint16_t*>(base + r.offset);
    };
    DeviceExpert e;
    e.slot = slot;
    e.shape = ExpertShape{static_cast<int64_t>(l.hidden), static_cast<int64_t>(l.intermediate),
                          bits, l.group_size};
    e.address = ExpertAddress{codes(l.gate.codes), halves(l.gate.scales), halves(l.gate.biases),
                              codes(l.up.codes),   halves(l.up.scales),   halves(l.up.biases),
                              codes(l.down.codes), halves(l.down.scales), halves(l.down.biases)};
    return e;
}

void DeviceExpertPool::note_pinned(uint32_t slot) {
    if (slots_->pins(slot) == 1) pinned_.push_back(slot);
}

void DeviceExpertPool::fence_eviction(const SlotKey& evicted) {
    // Kernels of a layer routed on the device may read any of its slots: the copy into this one
    // (queued next on the copy stream) waits for the layer's last release too.
    copy_waits_for(layer_release_[layer_of(evicted)]);
    count_resident(evicted, -1);
}

void DeviceExpertPool::upload(int32_t slot, const ExpertWeights& weights, bool compute_waits) {
    const store::ExpertLayout& l = layout_for(weights.bits);
    // The copy waits for the kernels that last read this slot.
    copy_waits_for(slot_release_[static_cast<size_t>(slot)]);
    std::byte* base = impl_->memory + static_cast<uint64_t>(slot) * slot_bytes_;
    const uint64_t used = l.down.biases.end();
    const auto* host = reinterpret_cast<const std::byte*>(weights.gate.codes) - l.gate.codes.offset;
    const auto at = [&](const void* p, const store::ByteRange& r) {
        return static_cast<const std::byte*>(p) == host + r.offset;
    };
    const bool contiguous =
        at(weights.gate.codes, l.gate.codes) && at(weights.gate.scales, l.gate.scales) &&
        at(weights.gate.biases, l.gate.biases) && at(weights.up.codes, l.up.codes) &&
        at(weights.up.scales, l.up.scales) && at(weights.up.biases, l.up.biases) &&
        at(weights.down.codes, l.down.codes) && at(weights.down.scales, l.down.scales) &&
        at(weights.down.biases, l.down.biases);
    if (contiguous) {  // the usual case: one record, one copy
        CHERENKOV_CUDA_CHECK(
            cudaMemcpyAsync(base, host, used, cudaMemcpyHostToDevice, impl_->copy));
    } else {  // views from elsewhere: each part to its offset in the slot
        const auto part = [&](const void* src, const store::ByteRange& r) {
            CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(base + r.offset, src, r.n_bytes,
                                                 cudaMemcpyHostToDevice, impl_->copy));
        };
        for (const auto& [m, p] : {std::pair{&weights.gate, &l.gate}, std::pair{&weights.up, &l.up},
                                   std::pair{&weights.down, &l.down}}) {
            part(m->codes, p->codes);
            part(m->scales, p->scales);
            part(m->biases, p->biases);
        }
    }
    CHERENKOV_CUDA_CHECK(cudaEventRecord(impl_->copy_done, impl_->copy));
    filled_ahead_[static_cast<size_t>(slot)] = !compute_waits;
    if (!compute_waits) {
        ahead_pending_ = true;
        return;
    }
    CHERENKOV_CUDA_CHECK(cudaStreamWaitEvent(impl_->compute, impl_->copy_done, 0));
    // The copy stream is in order: this wait covers every earlier copy, those ahead too.
    ahead_pending_ = false;
}

void DeviceExpertPool::join_ahead() {
    if (!ahead_pending_) return;
    // copy_done was last recorded after the latest copy, so the wait covers every one before it.
    CHERENKOV_CUDA_CHECK(cudaStreamWaitEvent(impl_->compute, impl_->copy_done, 0));
    ahead_pending_ = false;
}

void DeviceExpertPool::note_hit(uint32_t slot) {
    if (!filled_ahead_[slot]) return;
    filled_ahead_[slot] = false;
    ++used_ahead_;
}

bool DeviceExpertPool::takes(const ExpertWeights& weights) const {
    return weights.bits <= max_bits_ && affine_gemv_supports(weights.bits, layout_.group_size);
}

void DeviceExpertPool::fill(const SlotTable::Claim& claim, const SlotKey& key,
                            const ExpertWeights& weights, bool compute_waits) {
    try {
        if (claim.evicted) fence_eviction(*claim.evicted);
        upload(static_cast<int32_t>(claim.slot), weights, compute_waits);
    } catch (...) {
        // Nothing was queued into the slot, or the stream is broken: it holds no record.
        slots_->release(claim.slot);
        throw;
    }
    count_resident(key, 1);
}

void DeviceExpertPool::copy_ahead(int64_t layer, int32_t expert, const ExpertWeights& weights) {
    if (!takes(weights)) return;  // acquire() will refuse it, with the reason, if ever asked
    const SlotKey key = key_of(layer, expert, weights.bits);
    if (slots_->find(key) >= 0) return;
    SlotTable::Claim claim;
    try {
        claim = slots_->claim(key, layout_for(weights.bits).down.biases.end());
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::ResourceExhausted) return;  // every slot pinned: skip it
        throw;
    }
    note_pinned(claim.slot);
    fill(claim, key, weights, false);
    ++copied_ahead_;
}

DeviceExpert DeviceExpertPool::acquire(int64_t layer, int32_t expert,
                                       const ExpertWeights& weights) {
    if (!takes(weights)) {
        throw_invalid("[device_expert_pool] a " + std::to_string(weights.bits) +
                      "-bit record does not fit slots of " + std::to_string(max_bits_) + " bits");
    }
    join_ahead();
    const SlotKey key = key_of(layer, expert, weights.bits);
    const uint64_t used = layout_for(weights.bits).down.biases.end();
    SlotTable::Claim claim;
    try {
        claim = slots_->claim(key, used);
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::ResourceExhausted) throw;
        throw Error(ErrorKind::ResourceExhausted, "[device_expert_pool] all " +
                                                      std::to_string(n_slots_) +
                                                      " slots are pinned by the layer in flight");
    }
    const auto slot = static_cast<int32_t>(claim.slot);
    note_pinned(claim.slot);
    if (claim.hit) note_hit(claim.slot);
    if (!claim.hit) fill(claim, key, weights, true);
    return view_of(slot, weights.bits);
}

std::optional<DeviceExpert> DeviceExpertPool::acquire_resident(int64_t layer, int32_t expert,
                                                               int bits) {
    if (bits > max_bits_) return std::nullopt;
    const std::optional<uint32_t> slot = slots_->claim_held(key_of(layer, expert, bits));
    if (!slot) return std::nullopt;
    join_ahead();
    note_hit(*slot);
    note_pinned(*slot);
    return view_of(static_cast<int32_t>(*slot), bits);
}

int64_t DeviceExpertPool::record_release() {
    const int64_t generation = impl_->next_generation;
    const auto index = static_cast<size_t>(generation % kReleaseRing);
    CHERENKOV_CUDA_CHECK(cudaEventRecord(impl_->release[index], impl_->compute));
    impl_->recorded[index] = generation;
    ++impl_->next_generation;
    return generation;
}

void DeviceExpertPool::copy_waits_for(int64_t generation) {
    if (generation < 0) return;
    auto index = static_cast<size_t>(generation % kReleaseRing);
    if (impl_->recorded[index] != generation) {
        // The entry was recorded again since, at a later point of the compute stream: waiting
        // on it would hold the copy behind kernels queued just now (the layer in flight). The
        // ring's oldest entry is the earliest point still held, and it comes after `generation`
        // in stream order.
        index = static_cast<size_t>((impl_->next_generation - kReleaseRing) % kReleaseRing);
    }
    CHERENKOV_CUDA_CHECK(cudaStreamWaitEvent(impl_->copy, impl_->release[index], 0));
}

void DeviceExpertPool::release_pins(int64_t release) {
    for (const uint32_t slot : pinned_) {
        slot_release_[slot] = release;
        slots_->clear_pins(slot);
    }
    pinned_.clear();
}

void DeviceExpertPool::release_pinned() {
    if (pinned_.empty()) return;
    release_pins(record_release());
}

size_t DeviceExpertPool::layer_of(const SlotKey& key) const {
    return static_cast<size_t>(key.record / static_cast<uint64_t>(layout_.n_experts));
}

void DeviceExpertPool::count_resident(const SlotKey& key, int delta) {
    if (key.bits != layout_.bits) return;
    const size_t layer = layer_of(key);
    resident_in_layer_[layer] += delta;
    // The next use of the layer takes the host path again (an upload into the evicted slot waits
    // for the layer's last release_layer() event, as for any slot).
    if (delta < 0) on_device_[layer] = false;
}

const ExpertAddress* DeviceExpertPool::layer_addresses(int64_t layer) {
    if (layer < 0 || layer >= layout_.n_layers()) return nullptr;
    const auto l = static_cast<size_t>(layer);
    const int64_t n_experts = layout_.n_experts;
    // Only where the layer's slots are handed out: every layer start asks, and a wait there
    // would hold the next layer's mixer up behind the copies ahead.
    if (on_device_[l]) {
        join_ahead();
        return impl_->layer_map + layer * n_experts;
    }
    // Only a pool that holds the whole table keeps mapped layers mapped (no evictions); a
    // smaller one would evict and unmap them again and again.
    if (n_slots_ < static_cast<int64_t>(layout_.n_records()) || resident_in_layer_[l] < n_experts)
        return nullptr;
    if (impl_->layer_map == nullptr) {
        CHERENKOV_CUDA_CHECK(
            cudaMalloc(&impl_->layer_map, layout_.n_records() * sizeof(ExpertAddress)));
    }
    std::vector<ExpertAddress> addresses(static_cast<size_t>(n_experts));
    for (int32_t e = 0; e < n_experts; ++e) {
        addresses[static_cast<size_t>(e)] =
            view_of(slot_of(layer, e, layout_.bits), layout_.bits).address;
    }
    // From pageable memory: the call returns once the bytes are staged, so `addresses` may go.
    ExpertAddress* map = impl_->layer_map + layer * n_experts;
    join_ahead();
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(map, addresses.data(),
                                         addresses.size() * sizeof(ExpertAddress),
                                         cudaMemcpyHostToDevice, impl_->compute));
    on_device_[l] = true;
    return map;
}

void DeviceExpertPool::release_layer(int64_t layer) {
    layer_release_[static_cast<size_t>(layer)] = record_release();
}

unsigned long long* DeviceExpertPool::device_hits() const {
    return impl_->device_hits;
}

int64_t DeviceExpertPool::n_layers_on_device() const {
    return std::count(on_device_.begin(), on_device_.end(), true);
}

std::vector<int32_t> DeviceExpertPool::missing_in_layer(int64_t layer, int64_t most) const {
    std::vector<int32_t> missing;
    if (layer < 0 || layer >= layout_.n_layers() ||
        n_slots_ < static_cast<int64_t>(layout_.n_records()) ||
        left_incomplete_[static_cast<size_t>(layer)]) {
        return missing;
    }
    const int64_t n_missing = layout_.n_experts - resident_in_layer_[static_cast<size_t>(layer)];
    if (n_missing > most) return missing;
    for (int32_t e = 0; e < layout_.n_experts; ++e) {
        if (slot_of(layer, e, layout_.bits) < 0) missing.push_back(e);
    }
    return missing;
}

void DeviceExpertPool::leave_incomplete(int64_t layer) {
    if (layer >= 0 && layer < layout_.n_layers())
        left_incomplete_[static_cast<size_t>(layer)] = true;
}

ReplacementKind DeviceExpertPool::policy() const {
    return slots_->policy();
}

TierCounters DeviceExpertPool::counters() const {
    TierCounters c = slots_->counters();
    unsigned long long device = 0;
    CHERENKOV_CUDA_CHECK(
        cudaMemcpy(&device, impl_->device_hits, sizeof(device), cudaMemcpyDeviceToHost));
    c.hits += device;
    return c;
}

void DeviceExpertPool::wait_host_copies() {
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(impl_->copy));
}

void DeviceExpertPool::finish_batch(bool wait_copies) noexcept {
    if (wait_copies) cudaStreamSynchronize(impl_->copy);
    if (pinned_.empty()) return;
    // Record the release event as release_pinned() does; on failure fall back to waiting for
    // the compute stream so that no later copy can overtake a reader.
    int64_t release = -1;
    try {
        release = record_release();
    } catch (...) {
        cudaStreamSynchronize(impl_->compute);
    }
    release_pins(release);
}

void* DeviceExpertPool::host_staging(size_t bytes) {
    if (bytes <= impl_->staging_bytes) return impl_->staging;
    // Copies queued on the compute stream may still read the old buffer.
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
    if (impl_->staging != nullptr) {
        CHERENKOV_CUDA_CHECK(cudaFreeHost(impl_->staging));
        impl_->staging = nullptr;
        impl_->staging_bytes = 0;
    }
    const size_t size = std::max<size_t>(bytes, 64 << 10);
    CHERENKOV_CUDA_CHECK(cudaMallocHost(&impl_->staging, size));
    impl_->staging_bytes = size;
    return impl_->staging;
}

void* DeviceExpertPool::compute_stream() const {
    return impl_->compute;
}

int32_t DeviceExpertPool::slot_of(int64_t layer, int32_t expert, int bits) const {
    return slots_->find(key_of(layer, expert, bits));
}

bool DeviceExpertPool::pinned(int32_t slot) const {
    CHERENKOV_ASSERT(slot >= 0 && slot < n_slots_, "slot in range");
    return slots_->pins(static_cast<uint32_t>(slot)) > 0;
}

std::vector<std::byte> DeviceExpertPool::read_slot(int32_t slot) const {
    CHERENKOV_ASSERT(slot >= 0 && slot < n_slots_, "slot in range");
    std::vector<std::byte> out(slot_bytes_);
    CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
    CHERENKOV_CUDA_CHECK(cudaMemcpy(out.data(),
                                    impl_->memory + static_cast<uint64_t>(slot) * slot_bytes_,
                                    slot_bytes_, cudaMemcpyDeviceToHost));
    return out;
}

std::vector<ExpertAddress> DeviceExpertPool::read_layer_addresses(int64_t layer) const {
    CHERENKOV_ASSERT(
        layer >= 0 && layer < layout_.n_layers() && on_device_[static_cast<size_t>(layer)],
        "a layer on the device");
    std::vector<ExpertAddress> out(static_cast<size_t>(layout_.n_experts));
    CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
    CHERENKOV_CUDA_CHECK(cudaMemcpy(out.data(), impl_->layer_map + layer * layout_.n_experts,
                                    out.size() * sizeof(ExpertAddress), cudaMemcpyDeviceToHost));
    return out;
}

}  // namespace cherenkov::engine::cuda
