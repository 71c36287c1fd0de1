// The CUDA model in builds without nvcc.
#include "base/error.h"
#include "engine/cuda/cuda_model.h"

namespace cherenkov::engine::cuda {

std::unique_ptr<ModelBackend> make_cuda_model(const ModelWeights&, ExpertSource&,
                                              const CudaModelOptions&) {
    throw_unsupported("the CUDA backend is not available: built without CUDA");
}

}  // namespace cherenkov::engine::cuda
