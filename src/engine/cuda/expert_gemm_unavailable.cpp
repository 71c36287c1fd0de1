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

}  // namespace cherenkov::engine::cuda
