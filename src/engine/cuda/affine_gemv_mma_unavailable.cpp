// The tensor-core GEMV entry points in builds without nvcc: nothing is taken, calls throw.
#include "base/error.h"
#include "engine/cuda/affine_gemv_mma.h"

namespace cherenkov::engine::cuda {

bool mma_gemv_takes(int, int, int64_t, int) {
    return false;
}

void mma_gemv_dense(const DeviceAffineMatrix&, const float*, size_t, int, float*, size_t, void*) {
    throw_unsupported("[mma_gemv_dense] built without CUDA");
}

void mma_experts_gate_up(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                         void*, const int*) {
    throw_unsupported("[mma_experts_gate_up] built without CUDA");
}

void mma_experts_down(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                      void*, const int*) {
    throw_unsupported("[mma_experts_down] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
