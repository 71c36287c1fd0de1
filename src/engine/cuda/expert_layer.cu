// Host side of the one-launch expert kernel (expert_layer.h): which shapes it takes, the shared
// memory it is given, the counters its down items wait on, and the launch.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_attribute.cuh"
#include "engine/cuda/expert_layer.h"
#include "engine/cuda/expert_layer_imma.cuh"
#include "engine/cuda/switched_off.h"

namespace cherenkov::engine::cuda {

namespace {

// Entries a launch's table may have (affine_experts_swiglu's bound): 512 KB of counters a stream.
constexpr int kMaxTable = 65535;

bool switched_off_here() {
    static const bool off = switched_off("CHERENKOV_EXPERT_LAYER");
    return off;
}

int max_dynamic_smem() {
    static const int bytes = current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    return bytes;
}

int multiprocessors() {
    static const int n = current_device_attribute(cudaDevAttrMultiProcessorCount);
    return n;
}

expert_layer::Shape layer_shape(const ExpertShape& shape) {
    return {static_cast<int>(shape.hidden), static_cast<int>(shape.intermediate)};
}

// Every team needs a slot of its own (expert_layer::slot_of).
int slots_for(const ExpertShape& shape, int n_rows) {
    return expert_layer::slots_that_fit(layer_shape(shape), n_rows, max_dynamic_smem());
}

// The counters of the launches queued on one stream: they run one after another, and each leaves
// them zero. Made at a stream's first launch (in practice before any capture; in relaxed capture
// mode, with the clear on a stream of its own, should one be under way).
unsigned* counters_for(cudaStream_t stream) {
    static std::mutex mutex;
    static std::map<cudaStream_t, unsigned*> counters;
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = counters.find(stream);
    if (it != counters.end()) return it->second;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CHERENKOV_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    unsigned* buffer = nullptr;
    cudaStream_t side = nullptr;
    cudaError_t status = cudaMalloc(&buffer, 2 * kMaxTable * sizeof(unsigned));
    if (status == cudaSuccess) status = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    if (status == cudaSuccess) {
        status = cudaMemsetAsync(buffer, 0, 2 * kMaxTable * sizeof(unsigned), side);
    }
    if (status == cudaSuccess) status = cudaStreamSynchronize(side);
    if (side != nullptr) cudaStreamDestroy(side);
    CHERENKOV_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHERENKOV_CUDA_CHECK(status);
    counters.emplace(stream, buffer);
    return buffer;
}

template <int Rows>
void launch_rows(const expert_layer::Params& p, size_t smem, cudaStream_t stream) {
    auto* kernel = expert_layer::experts_layer_kernel<Rows>;
    static const bool configured = [&] {  // once per kernel: the device's whole opt-in budget
        CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_dynamic_smem()));
        return true;
    }();
    (void)configured;
    launch_dependent(kernel, dim3(static_cast<unsigned>(multiprocessors())),
                     dim3(expert_layer::kThreads), smem, stream, p);
}

}  // namespace

bool layer_experts_take(const ExpertShape& shape, int n_rows) {
    return !switched_off_here() && n_rows >= 1 && n_rows <= kMaxGemvRows &&
           device_compute_major() == 9 &&
           expert_layer::takes(shape.bits, shape.group_size, shape.hidden, shape.intermediate) &&
           slots_for(shape, n_rows) >= expert_layer::kTeams;
}

void layer_experts_parts(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                         const float* x, int n_rows, float* h, float* parts, void* stream,
                         const int* n_in_use) {
    if (!layer_experts_take(shape, n_rows)) {
        throw_invalid("[layer_experts_parts] the one-launch kernel does not take this shape");
    }
    if (n_experts < 1 || n_experts > kMaxTable) {
        throw_invalid("[layer_experts_parts] n_experts " + std::to_string(n_experts));
    }
    const auto cs = static_cast<cudaStream_t>(stream);
    expert_layer::Params p{};
    p.table = table;
    p.n_in_use = n_in_use;
    p.capacity = n_experts;
    p.x = x;
    p.h = h;
    p.parts = parts;
    p.counters = counters_for(cs);
    p.shape = layer_shape(shape);
    p.n_slots = slots_for(shape, n_rows);
    p.slot_bytes = expert_layer::item_bytes(p.shape);
    const auto smem = static_cast<size_t>(
        expert_layer::smem_layout(p.shape, n_rows, p.n_slots, p.slot_bytes).total);
    switch (n_rows) {
        case 1: launch_rows<1>(p, smem, cs); break;
        case 2: launch_rows<2>(p, smem, cs); break;
        case 3: launch_rows<3>(p, smem, cs); break;
        default: launch_rows<4>(p, smem, cs); break;
    }
}

}  // namespace cherenkov::engine::cuda
