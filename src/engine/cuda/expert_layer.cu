// Host side of the one-launch expert kernel (expert_layer.h): which shapes it takes, the shared
// memory it is given, the tagged h its down items wait on, and the launch.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/expert_layer.h"
#include "engine/cuda/expert_layer_imma.cuh"

namespace cherenkov::engine::cuda {

namespace {

// Entries a launch's table may have (affine_experts_swiglu_parts's bound).
constexpr int kMaxTable = 65535;

int max_dynamic_smem() {
    return static_cast<int>(kernel_policy().max_shared_per_block);
}

int multiprocessors() {
    return kernel_policy().multiprocessors;
}

expert_layer::Shape layer_shape(const ExpertShape& shape) {
    return {static_cast<int>(shape.hidden), static_cast<int>(shape.intermediate)};
}

// Every team needs a slot of its own (expert_layer::slot_of).
int slots_for(const ExpertShape& shape, int n_rows) {
    return expert_layer::slots_that_fit(layer_shape(shape), n_rows, max_dynamic_smem());
}

// What the launches queued on one stream share: the count of blocks started (each launch's tag
// comes from it), and the tagged h, which only grows. Launches on one stream run one after
// another, so one set serves them all. A buffer outgrown is kept: a captured graph may still name
// it. Made and grown outside any capture in practice; within one (relaxed mode), the allocation
// and its clearing run on a stream of their own.
struct StreamShared {
    unsigned long long* blocks_started = nullptr;
    unsigned long long* h = nullptr;
    size_t h_words = 0;
    std::vector<unsigned long long*> outgrown;
};

// n zeroed words of device memory, allocated and cleared outside the caller's stream capture.
unsigned long long* zeroed_words(size_t n) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CHERENKOV_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    unsigned long long* words = nullptr;
    cudaStream_t side = nullptr;
    cudaError_t status = cudaMalloc(&words, n * sizeof *words);
    if (status == cudaSuccess) status = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    if (status == cudaSuccess) status = cudaMemsetAsync(words, 0, n * sizeof *words, side);
    if (status == cudaSuccess) status = cudaStreamSynchronize(side);
    if (side != nullptr) cudaStreamDestroy(side);
    if (status != cudaSuccess && words != nullptr) cudaFree(words);
    CHERENKOV_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHERENKOV_CUDA_CHECK(status);
    return words;
}

struct LaunchShared {
    unsigned long long* blocks_started;
    unsigned long long* h;
};

// The stream's shared buffers, with room for h_words tagged words of h.
LaunchShared shared_for(cudaStream_t stream, size_t h_words) {
    static std::mutex mutex;
    static std::map<cudaStream_t, StreamShared> by_stream;
    const std::lock_guard<std::mutex> lock(mutex);
    StreamShared& sh = by_stream[stream];
    if (sh.blocks_started == nullptr) sh.blocks_started = zeroed_words(1);
    if (sh.h_words < h_words) {
        unsigned long long* grown = zeroed_words(h_words);
        if (sh.h != nullptr) sh.outgrown.push_back(sh.h);
        sh.h = grown;
        sh.h_words = h_words;
    }
    return {sh.blocks_started, sh.h};
}

template <int Rows>
void launch_rows(const expert_layer::Params& p, size_t smem, cudaStream_t stream) {
    auto* kernel = expert_layer::experts_layer_kernel<Rows>;
    // The device's whole opt-in budget, set at every launch rather than remembered per process
    // (a host call that queues no work: allowed under stream capture, skipped by graph replays).
    CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              max_dynamic_smem()));
    // Always one block per multiprocessor: the tag of a launch is the stream's started-block
    // count over the grid, so every launch on a stream must have the same grid.
    launch_dependent(kernel, dim3(static_cast<unsigned>(multiprocessors())),
                     dim3(expert_layer::kThreads), smem, stream, p);
}

}  // namespace

bool layer_experts_take(const ExpertShape& shape, int n_rows) {
    const KernelPolicy& policy = kernel_policy();
    return policy.expert_layer && n_rows >= 1 && n_rows <= kMaxGemvRows &&
           policy.compute_major == 9 &&
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
    const LaunchShared shared = shared_for(
        cs, static_cast<size_t>(n_experts) * n_rows * static_cast<size_t>(shape.intermediate));
    p.h_tagged = shared.h;
    p.blocks_started = shared.blocks_started;
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
