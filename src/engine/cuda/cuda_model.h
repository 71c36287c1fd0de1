// The qwen4_exp forward pass on an NVIDIA GPU (issue 9): a ModelBackend like the CPU Model, with
// dense weights resident in device memory, per-sequence caches in device memory (hung on
// SequenceState::backend), and routed experts copied from the host ExpertSource into a bounded
// device expert pool. Built from cuda_model.cu with CUDA, or cuda_model_unavailable.cpp without,
// where make_cuda_model throws Unsupported "built without CUDA".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/model/model_backend.h"
#include "engine/model/model_weights.h"

namespace cherenkov::engine {
class ExpertSource;
}

namespace cherenkov::engine::cuda {

struct CudaModelOptions {
    int device = 0;
    std::string pool = "adaptive";  // --pool-gb for the device expert pool: N, max, adaptive
    int64_t max_rows = 3;           // rows per decode step (token + drafts): the pool's minimum
    int64_t max_ctx = 4096;         // context the memory plan reserves room for
    int64_t prefill_chunk = 256;    // rows per prefill call the scratch reservation covers
    int max_bits = 0;               // the largest expert precision in use (mixed mode), 0: resident
};

// Uploads `weights` and sizes the device expert pool (adaptive: free device memory after the
// weights, minus sequence state for max_ctx and scratch). Throws InvalidInput for an explicit pool
// below one step's union, ResourceExhausted when the device cannot hold the weights, and
// Unsupported without a usable device. `weights` and `experts` must outlive the model.
std::unique_ptr<ModelBackend> make_cuda_model(const ModelWeights& weights, ExpertSource& experts,
                                              const CudaModelOptions& options);

}  // namespace cherenkov::engine::cuda
