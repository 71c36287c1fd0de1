// The qwen4_exp forward pass on an NVIDIA GPU (issue 9): a ModelBackend like the CPU Model, with
// dense weights resident in device memory, per-sequence caches in device memory (hung on
// SequenceState::backend), and routed experts copied from the host ExpertSource into a bounded
// device expert pool. Built from cuda_model.cu with CUDA, or unavailable.cpp without,
// where make_cuda_model throws Unsupported "built without CUDA".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/cpu/matmul.h"
#include "engine/cuda/cpu_experts.h"
#include "engine/experts/pool_setting.h"
#include "engine/experts/replacement_policy.h"
#include "engine/model/model_backend.h"
#include "engine/model/model_weights.h"
#include "engine/model/prefill_quantum.h"
#include "engine/tuning.h"

namespace cherenkov::engine {
class ExpertSource;
class ThreadPool;
}

namespace cherenkov::engine::cuda {

struct CudaModelOptions {
    int device = 0;
    PoolSetting pool;        // --pool-gb for the device expert pool: N, max or adaptive
    int64_t max_rows = 3;    // rows per decode step (token + drafts): the pool's minimum
    int64_t max_ctx = 4096;  // context the memory plan reserves room for
    int max_bits = 0;        // the largest expert precision in use (mixed mode), 0: resident
    // --cache-policy: the device pool replaces slots as the host cache does.
    ReplacementKind cache_policy = ReplacementKind::Lru;
    // --prefill-quantum: rows per prefill call the scratch reservation covers (fewer when an
    // adaptive pool leaves less; an automatic one grows up to kStreamingPrefillQuantum beside an
    // explicit pool smaller than the table, up to kResidentPrefillQuantum beside a pool that
    // holds it; max_rows_per_call() says how many).
    PrefillQuantum prefill_quantum;
    Tuning tuning;  // --tuning: the fast paths' A/B switches (engine/tuning.h)
    // --cpu-experts: decode misses of the device pool computed on the CPU, on `cpu_pool` (null:
    // never) with `cpu_activations`, instead of copied to the device (cpu_experts.h).
    CpuExpertsSetting cpu_experts;
    ThreadPool* cpu_pool = nullptr;
    ActivationPrecision cpu_activations = ActivationPrecision::F32;
};

// Uploads `weights` and sizes the device expert pool (adaptive: free device memory after the
// weights, minus sequence state for max_ctx and the scratch of a prefill_quantum-row chunk).
// Throws InvalidInput for an explicit pool below one step's union or one that leaves too little
// scratch for prefill_quantum rows, ResourceExhausted when the device cannot hold the weights,
// and Unsupported without a usable device. `weights`, `experts` and options.cpu_pool must outlive
// the model.
std::unique_ptr<ModelBackend> make_cuda_model(const ModelWeights& weights, ExpertSource& experts,
                                              const CudaModelOptions& options);

}  // namespace cherenkov::engine::cuda
