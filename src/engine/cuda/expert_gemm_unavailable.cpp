// The grouped expert GEMM in builds without nvcc: nothing is taken, and launches throw "built
// without CUDA".
#include "base/error.h"
#include "engine/cuda/expert_gemm.h"

namespace cherenkov::engine::cuda {

bool expert_gemm_takes(const ExpertShape&) {
    return false;
}

void expert_gemm_gate_up(const ExpertGemmTiles&, const float*, int, float*, void*) {
    throw_unsupported("[expert_gemm_gate_up] built without CUDA");
}

void expert_gemm_down(const ExpertGemmTiles&, const float*, float*, void*) {
    throw_unsupported("[expert_gemm_down] built without CUDA");
}

bool affine_gemm_tensor_cores_take(const DeviceAffineMatrix&, const float*, size_t) {
    return false;
}

void affine_gemm_tensor_cores(const DeviceAffineMatrix&, const float*, size_t, int64_t, float*,
                              size_t, void*) {
    throw_unsupported("[affine_gemm_tensor_cores] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
