// Alternative kernels for the routed-expert decode GEMV (issue 9): the same contract as
// affine_experts_swiglu and affine_experts_swiglu_parts (affine_gemv.h), computed by a kernel
// picked at run time, so one bench run on the GPU can time them side by side and the MoE can
// switch to a winner with one line. Every variant sums each output in an order fixed by the
// shape and the device's SM count, so results are bitwise reproducible run to run on one GPU.
// Built from affine_experts_variants.cu with CUDA, or from affine_experts_variants_unavailable.cpp
// without it, where every call throws "built without CUDA".
#pragma once

#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

enum class ExpertKernel {
    Current,  // affine_experts_swiglu_parts itself (two launches, one block per 8-32 rows)
    A,        // persistent grid, two launches, sub-warps of 16 (gate/up) and 4 (down) lanes
    B,        // as A with sub-warps of 8 lanes for gate/up and a deeper pipeline
    C,        // one persistent launch per call: gate/up then down behind per-expert counters
};

constexpr ExpertKernel kExpertKernels[] = {ExpertKernel::Current, ExpertKernel::A, ExpertKernel::B,
                                           ExpertKernel::C};

const char* expert_kernel_name(ExpertKernel kernel);

// affine_experts_swiglu_parts computed by `kernel`. Shapes a variant does not cover (3-bit codes,
// more than 64 experts, x over 48 KB) run the Current kernels. C keeps its counters in static
// device memory: calls with C must not run concurrently (one stream, as the MoE does).
void affine_experts_swiglu_parts_variant(ExpertKernel kernel, const ExpertShape& shape,
                                         const ExpertAddress* table, int n_experts, const float* x,
                                         int n_rows, float* h_scratch, float* parts, void* stream);

// affine_experts_swiglu (parts, then the weighted sum over experts in ascending order) computed
// by `kernel`; scratch as affine_experts_scratch_floats.
void affine_experts_swiglu_variant(ExpertKernel kernel, const ExpertShape& shape,
                                   const ExpertAddress* table, const float* weights, int n_experts,
                                   const float* x, int n_rows, float* scratch, float* y,
                                   bool accumulate, void* stream);

}  // namespace cherenkov::engine::cuda
