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

}  // namespace cherenkov::engine::cuda
