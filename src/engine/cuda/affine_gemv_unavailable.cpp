// The GPU GEMV entry points in builds without nvcc: each call throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

bool affine_gemv_supports(int, int) {
    return false;
}

void affine_gemv(const DeviceAffineMatrix&, const float*, size_t, int, float*, size_t, void*) {
    throw_unsupported("[affine_gemv] built without CUDA");
}

size_t affine_experts_scratch_floats(const ExpertShape& shape, int n_experts, int n_rows) {
    return static_cast<size_t>(n_experts) * static_cast<size_t>(n_rows) *
           static_cast<size_t>(shape.intermediate + shape.hidden);
}

void affine_experts_swiglu(const ExpertShape&, const ExpertAddress*, const float*, int,
                           const float*, int, float*, float*, bool, void*) {
    throw_unsupported("[affine_experts_swiglu] built without CUDA");
}

void affine_experts_swiglu_parts(const ExpertShape&, const ExpertAddress*, int, const float*, int,
                                 float*, float*, void*, const int*) {
    throw_unsupported("[affine_experts_swiglu_parts] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
