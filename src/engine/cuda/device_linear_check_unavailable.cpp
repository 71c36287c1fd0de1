// The plain doors of device_linear_check.h in builds without nvcc: each call throws.
#include "base/error.h"
#include "engine/cuda/device_linear_check.h"

namespace cherenkov::engine::cuda {

void linear_apply_plain(const DeviceLinear&, const float*, int64_t, float*, void*) {
    throw_unsupported("[linear_apply] built without CUDA");
}

void affine_matmul_plain(const DeviceAffineMatrix&, const float*, size_t, int64_t, float*, size_t,
                         void*) {
    throw_unsupported("[affine_matmul] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
