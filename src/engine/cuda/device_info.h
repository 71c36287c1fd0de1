// What CUDA devices this build can use. Built from device_info.cu with CUDA, or from
// unavailable.cpp without it; callers never need #ifdef.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cherenkov::engine::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_capability_major = 0;
    int compute_capability_minor = 0;
    uint64_t total_memory_bytes = 0;
};

struct DeviceQuery {
    bool built_with_cuda = false;
    std::vector<DeviceInfo> devices;
    // Why `devices` is empty: "built without CUDA", or the runtime's error (no driver, no device).
    std::string unavailable_reason;
};

DeviceQuery query_devices();

}  // namespace cherenkov::engine::cuda
