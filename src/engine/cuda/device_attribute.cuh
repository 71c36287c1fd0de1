// An attribute of the current CUDA device (compute capability, multiprocessor count, shared
// memory limits), or 0 when there is no usable device (the error is cleared, so the caller can
// fall back to another kernel instead of failing).
#pragma once

#include <cuda_runtime.h>

namespace cherenkov::engine::cuda {

inline int current_device_attribute(cudaDeviceAttr attribute) {
    int device = 0;
    int value = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return value;
}

// The current device's compute capability major (0 without a device), asked once: a process
// runs the engine on one device, and the kernels' "takes" checks ask on every call.
inline int device_compute_major() {
    static const int major = current_device_attribute(cudaDevAttrComputeCapabilityMajor);
    return major;
}

}  // namespace cherenkov::engine::cuda
