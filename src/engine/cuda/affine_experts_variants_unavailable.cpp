// The expert-kernel variants in builds without nvcc: each call throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/affine_experts_variants.h"

namespace cherenkov::engine::cuda {

const char* expert_kernel_name(ExpertKernel kernel) {
    switch (kernel) {
        case ExpertKernel::Current: return "current";
        case ExpertKernel::A: return "A";
        case ExpertKernel::B: return "B";
        case ExpertKernel::C: return "C";
    }
    return "?";
}

void affine_experts_swiglu_parts_variant(ExpertKernel, const ExpertShape&, const ExpertAddress*,
                                         int, const float*, int, float*, float*, void*) {
    throw_unsupported("[affine_experts_swiglu_parts_variant] built without CUDA");
}

void affine_experts_swiglu_variant(ExpertKernel, const ExpertShape&, const ExpertAddress*,
                                   const float*, int, const float*, int, float*, float*, bool,
                                   void*) {
    throw_unsupported("[affine_experts_swiglu_variant] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
