// The one-launch expert kernel's entry points in builds without nvcc: nothing is taken, calls
// throw.
#include "base/error.h"
#include "engine/cuda/expert_layer.h"

namespace cherenkov::engine::cuda {

bool layer_experts_take(const ExpertShape&, int) {
    return false;
}

void layer_experts_parts(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                         float*, void*, const int*) {
    throw_unsupported("[layer_experts_parts] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
