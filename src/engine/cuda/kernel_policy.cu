// KernelPolicy (kernel_policy.h): the device's attributes and the thread's current policy.
#include <cuda_runtime.h>

#include "engine/cuda/kernel_policy.h"

namespace cherenkov::engine::cuda {
namespace {

thread_local const KernelPolicy* current_policy = nullptr;

// An attribute of `device`, or 0 when it cannot be asked (the error is cleared, so a launcher
// falls back to another kernel instead of failing).
int device_attribute(int device, cudaDeviceAttr attribute) {
    int value = 0;
    if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return value;
}

}  // namespace

KernelPolicy kernel_policy_for(int device, const Tuning& tuning) {
    KernelPolicy policy = KernelPolicy::switches_of(tuning);
    policy.compute_major = device_attribute(device, cudaDevAttrComputeCapabilityMajor);
    policy.multiprocessors = device_attribute(device, cudaDevAttrMultiProcessorCount);
    policy.max_shared_per_block =
        static_cast<size_t>(device_attribute(device, cudaDevAttrMaxSharedMemoryPerBlockOptin));
    policy.launch_overlap = tuning.launch_overlap && policy.compute_major >= 9;
    return policy;
}

const KernelPolicy& kernel_policy() {
    if (current_policy != nullptr) return *current_policy;
    // Outside a scope: asked anew, so a test that switches devices sees the new one.
    thread_local KernelPolicy asked;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        asked = KernelPolicy{};
        return asked;
    }
    asked = kernel_policy_for(device, Tuning{});
    return asked;
}

KernelScope::KernelScope(const KernelPolicy& policy) : previous_(current_policy) {
    current_policy = &policy;
}

KernelScope::~KernelScope() {
    current_policy = previous_;
}

}  // namespace cherenkov::engine::cuda
