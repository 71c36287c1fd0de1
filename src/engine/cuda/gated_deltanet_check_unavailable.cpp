// The device Gated DeltaNet test entry in builds without nvcc: the call throws "built without
// CUDA".
#include "base/error.h"
#include "engine/cuda/gated_deltanet_check.h"

namespace cherenkov::engine::cuda {

void gated_deltanet_check(const model_data::qwen4_exp::Config&, const GatedDeltaNetWeights&,
                          const void*, uint64_t, GatedDeltaNetState&, const float*,
                          const std::vector<int64_t>&, float*, float*, float*) {
    throw_unsupported("[gated_deltanet_check] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
