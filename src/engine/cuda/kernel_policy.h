// What the kernel launchers decide with: the device's facts, asked once when a model is made,
// and the kernel switches of engine::Tuning with what the device cannot do taken out. A model
// keeps its policy and installs it with a KernelScope around every call it makes, so launchers
// deep in the kernel families read it without a parameter on every function (the engine worker
// is the only thread that calls a model, docs/style.md 2.6). Plain C++: tests and benches
// include it; without CUDA the device has no facts (unavailable.cpp).
#pragma once

#include <cstddef>

#include "engine/tuning.h"

namespace cherenkov::engine::cuda {

struct KernelPolicy {
    int compute_major = 0;            // compute capability major; 0: no usable device
    int multiprocessors = 0;          // streaming multiprocessors
    size_t max_shared_per_block = 0;  // opt-in dynamic shared memory one block may have
    // Tuning's kernel switches; launch_overlap only where the device has it (sm_90).
    bool launch_overlap = false;
    bool gemm_mma = true;
    bool gemv_mma = true;
    bool gemv_bulk = true;
    bool gemv_slices = true;
    bool expert_layer = true;

    // The policy with no device facts: tuning's switches, launch overlap off.
    static KernelPolicy switches_of(const Tuning& tuning) {
        KernelPolicy policy;
        policy.gemm_mma = tuning.gemm_mma;
        policy.gemv_mma = tuning.gemv_mma;
        policy.gemv_bulk = tuning.gemv_bulk;
        policy.gemv_slices = tuning.gemv_slices;
        policy.expert_layer = tuning.expert_layer;
        return policy;
    }
};

// The policy for CUDA device `device` (its attributes asked now) under `tuning`.
KernelPolicy kernel_policy_for(int device, const Tuning& tuning);

// The policy the launchers of this thread use: the innermost KernelScope's, or else the current
// device's under the default tuning, asked anew on each call (tests and benches that call
// kernels directly; the engine always has a scope).
const KernelPolicy& kernel_policy();

// Makes `policy` this thread's kernel policy until the scope ends (scopes nest). `policy` must
// outlive the scope.
class KernelScope {
public:
    explicit KernelScope(const KernelPolicy& policy);
    ~KernelScope();
    KernelScope(const KernelScope&) = delete;
    KernelScope& operator=(const KernelScope&) = delete;

private:
    const KernelPolicy* previous_;
};

}  // namespace cherenkov::engine::cuda
