// Enumerates CUDA devices through the runtime. A machine without a driver or device is not
// an error here: the query says why nothing is available and the CPU backend is used.
#include <cuda_runtime.h>

#include "engine/cuda/device_info.h"

namespace cherenkov::engine::cuda {

DeviceQuery query_devices() {
    DeviceQuery query;
    query.built_with_cuda = true;
    int n_devices = 0;
    cudaError_t status = cudaGetDeviceCount(&n_devices);
    if (status != cudaSuccess) {
        query.unavailable_reason = cudaGetErrorString(status);
        cudaGetLastError();  // clear the sticky error so later calls start clean
        return query;
    }
    for (int index = 0; index < n_devices; ++index) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) continue;
        DeviceInfo info;
        info.index = index;
        info.name = prop.name;
        info.compute_capability_major = prop.major;
        info.compute_capability_minor = prop.minor;
        info.total_memory_bytes = prop.totalGlobalMem;
        query.devices.push_back(info);
    }
    if (query.devices.empty()) query.unavailable_reason = "no CUDA device found";
    return query;
}

}  // namespace cherenkov::engine::cuda
