// Stand-in for the CUDA backend in builds without nvcc (MLX's no_gpu pattern).
#include "engine/cuda/device_info.h"

namespace cherenkov::engine::cuda {

DeviceQuery query_devices() {
    DeviceQuery query;
    query.unavailable_reason = "built without CUDA";
    return query;
}

}  // namespace cherenkov::engine::cuda
