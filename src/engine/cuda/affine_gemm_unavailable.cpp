// The GPU prefill matmuls in builds without nvcc: each call throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/affine_gemm.h"

namespace cherenkov::engine::cuda {

void affine_gemm(const DeviceAffineMatrix&, const float*, size_t, int64_t, float*, size_t, void*) {
    throw_unsupported("[affine_gemm] built without CUDA");
}

void f32_matmul(const DeviceF32Matrix&, const float*, size_t, int64_t, float*, size_t, void*) {
    throw_unsupported("[f32_matmul] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
