// DeviceExpertPool in builds without nvcc: construction throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/device_expert_pool.h"

namespace cherenkov::engine::cuda {

struct DeviceExpertPool::Impl {};

DeviceExpertPool::DeviceExpertPool(const store::ExpertLayout& layout, int64_t n_slots, void*,
                                   int max_bits, ReplacementKind)
    : layout_(layout), n_slots_(n_slots), max_bits_(max_bits) {
    throw_unsupported("[device_expert_pool] built without CUDA");
}

DeviceExpertPool::~DeviceExpertPool() = default;

DeviceExpert DeviceExpertPool::acquire(int64_t, int32_t, const ExpertWeights&) {
    throw_unsupported("[device_expert_pool] built without CUDA");
}
std::optional<DeviceExpert> DeviceExpertPool::acquire_resident(int64_t, int32_t, int) {
    return std::nullopt;
}
void DeviceExpertPool::release_pinned() {}
void DeviceExpertPool::wait_host_copies() {}
void DeviceExpertPool::finish_batch(bool) noexcept {}
void* DeviceExpertPool::host_staging(size_t) {
    throw_unsupported("[device_expert_pool] built without CUDA");
}
void* DeviceExpertPool::compute_stream() const {
    return nullptr;
}
int32_t DeviceExpertPool::slot_of(int64_t, int32_t, int) const {
    return -1;
}
bool DeviceExpertPool::pinned(int32_t) const {
    return false;
}
std::vector<std::byte> DeviceExpertPool::read_slot(int32_t) const {
    throw_unsupported("[device_expert_pool] built without CUDA");
}
const ExpertAddress* DeviceExpertPool::layer_addresses(int64_t) {
    return nullptr;
}
void DeviceExpertPool::release_layer(int64_t) {}
unsigned long long* DeviceExpertPool::device_hits() const {
    return nullptr;
}
int64_t DeviceExpertPool::n_layers_on_device() const {
    return 0;
}
std::vector<int32_t> DeviceExpertPool::missing_in_layer(int64_t, int64_t) const {
    return {};
}
void DeviceExpertPool::leave_incomplete(int64_t) {}
std::vector<ExpertAddress> DeviceExpertPool::read_layer_addresses(int64_t) const {
    throw_unsupported("[device_expert_pool] built without CUDA");
}
ReplacementKind DeviceExpertPool::policy() const {
    return ReplacementKind::Lru;
}
TierCounters DeviceExpertPool::counters() const {
    return {};
}

}  // namespace cherenkov::engine::cuda
