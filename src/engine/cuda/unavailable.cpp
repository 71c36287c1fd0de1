// Stand-ins for the CUDA backend in builds without nvcc (MLX's no_gpu pattern), one file for the
// library: queries answer "no device" or "not taken", and whatever would touch a device throws
// Unsupported "built without CUDA", so a CPU-only build links and says why.
#include "base/error.h"
#include "engine/cuda/affine_gemm.h"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/affine_gemv_bulk.h"
#include "engine/cuda/affine_gemv_mma.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/expert_gemm.h"
#include "engine/cuda/expert_grouping.h"
#include "engine/cuda/expert_layer.h"
#include "engine/cuda/kernel_policy.h"
#include "engine/cuda/token_select.h"

namespace cherenkov::engine::cuda {

// device_info.h
DeviceQuery query_devices() {
    DeviceQuery query;
    query.unavailable_reason = "built without CUDA";
    return query;
}

// kernel_policy.h: no device, so no facts; the switches are the tuning's.
KernelPolicy kernel_policy_for(int, const Tuning& tuning) {
    return KernelPolicy::switches_of(tuning);
}

const KernelPolicy& kernel_policy() {
    static const KernelPolicy none;  // a constant: nothing is asked of a device
    return none;
}

KernelScope::KernelScope(const KernelPolicy&) : previous_(nullptr) {}

KernelScope::~KernelScope() = default;

// affine_gemm.h
void affine_gemm(const DeviceAffineMatrix&, const float*, size_t, int64_t, float*, size_t, void*) {
    throw_unsupported("[affine_gemm] built without CUDA");
}

void f32_matmul(const DeviceF32Matrix&, const float*, size_t, int64_t, float*, size_t, void*) {
    throw_unsupported("[f32_matmul] built without CUDA");
}

// affine_gemv.h
bool affine_gemv_supports(int, int) {
    return false;
}

void affine_gemv(const DeviceAffineMatrix&, const float*, size_t, int, float*, size_t, void*) {
    throw_unsupported("[affine_gemv] built without CUDA");
}

void affine_experts_swiglu_parts(const ExpertShape&, const ExpertAddress*, int, const float*, int,
                                 float*, float*, void*, const int*) {
    throw_unsupported("[affine_experts_swiglu_parts] built without CUDA");
}

// affine_gemv_bulk.h
bool bulk_gemv_takes(int, int, int64_t, int64_t, int) {
    return false;
}

int bulk_gemv_column_slices(int, int, int64_t, int64_t, int) {
    return 0;
}

bool bulk_experts_take(const ExpertShape&, int) {
    return false;
}

void bulk_gemv_dense(const DeviceAffineMatrix&, const float*, size_t, int, float*, size_t, void*,
                     float) {
    throw_unsupported("[bulk_gemv_dense] built without CUDA");
}

void bulk_experts_gate_up(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                          void*, const int*) {
    throw_unsupported("[bulk_experts_gate_up] built without CUDA");
}

void bulk_experts_down(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                       void*, const int*) {
    throw_unsupported("[bulk_experts_down] built without CUDA");
}

// affine_gemv_mma.h
bool mma_gemv_takes(int, int, int64_t, int) {
    return false;
}

void mma_gemv_dense(const DeviceAffineMatrix&, const float*, size_t, int, float*, size_t, void*) {
    throw_unsupported("[mma_gemv_dense] built without CUDA");
}

void mma_experts_gate_up(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                         void*, const int*) {
    throw_unsupported("[mma_experts_gate_up] built without CUDA");
}

void mma_experts_down(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                      void*, const int*) {
    throw_unsupported("[mma_experts_down] built without CUDA");
}

// cuda_model.h
std::unique_ptr<ModelBackend> make_cuda_model(const ModelWeights&, ExpertSource&,
                                              const CudaModelOptions&) {
    throw_unsupported("the CUDA backend is not available: built without CUDA");
}

// device_buffer.h
DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
    if (bytes > 0) throw_unsupported("[device_buffer] built without CUDA");
}

DeviceBuffer::~DeviceBuffer() {
    reset();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
    return *this;
}

void DeviceBuffer::upload(const void*, size_t, size_t) {
    throw_unsupported("[device_buffer] built without CUDA");
}

void DeviceBuffer::download(void*, size_t, size_t) const {
    throw_unsupported("[device_buffer] built without CUDA");
}

void DeviceBuffer::fill(unsigned char) {
    throw_unsupported("[device_buffer] built without CUDA");
}

void DeviceBuffer::reset() {
    data_ = nullptr;
    size_ = 0;
}

void device_synchronize() {
    throw_unsupported("[device_buffer] built without CUDA");
}

// device_expert_pool.h
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
void DeviceExpertPool::copy_ahead(int64_t, int32_t, const ExpertWeights&) {
    throw_unsupported("[device_expert_pool] built without CUDA");
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

// device_weights.h
std::unique_ptr<DeviceModelWeights> upload_model_weights(const ModelWeights&) {
    throw_unsupported("[upload_model_weights] built without CUDA");
}

DeviceLinear translate_linear(const Linear&, const void*, uint64_t, const void*) {
    throw_unsupported("[translate_linear] built without CUDA");
}

// expert_gemm.h
bool expert_gemm_takes(const ExpertShape&) {
    return false;
}

void expert_gemm_gate_up(const ExpertGemmTiles&, const float*, int, float*, void*) {
    throw_unsupported("[expert_gemm_gate_up] built without CUDA");
}

void expert_gemm_down(const ExpertGemmTiles&, const float*, float*, void*) {
    throw_unsupported("[expert_gemm_down] built without CUDA");
}

// expert_grouping.h
void group_by_expert(const int32_t*, const float*, int64_t, int, int, const DeviceExpertGroups&,
                     void*) {
    throw_unsupported("[group_by_expert] built without CUDA");
}

bool affine_gemm_tensor_cores_take(const DeviceAffineMatrix&, const float*, size_t) {
    return false;
}

void affine_gemm_tensor_cores(const DeviceAffineMatrix&, const float*, size_t, int64_t, float*,
                              size_t, void*) {
    throw_unsupported("[affine_gemm_tensor_cores] built without CUDA");
}

// expert_layer.h
bool layer_experts_take(const ExpertShape&, int) {
    return false;
}

void layer_experts_parts(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                         float*, void*, const int*) {
    throw_unsupported("[layer_experts_parts] built without CUDA");
}

// token_select.h
void token_select(const float*, int64_t, int64_t, const TokenChoice*, uint64_t*, int32_t*, void*) {
    throw_unsupported("[token_select] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
