// Device weights in builds without nvcc: uploading throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/device_weights.h"

namespace cherenkov::engine::cuda {

std::unique_ptr<DeviceModelWeights> upload_model_weights(const ModelWeights&) {
    throw_unsupported("[upload_model_weights] built without CUDA");
}

DeviceLinear translate_linear(const Linear&, const void*, uint64_t, const void*) {
    throw_unsupported("[translate_linear] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
