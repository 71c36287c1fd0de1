// MoeCheck in builds without nvcc: construction throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/moe_check.h"

namespace cherenkov::engine::cuda {

struct MoeCheck::Impl {};

MoeCheck::MoeCheck(const ModelWeights&, ExpertSource&, int64_t) {
    throw_unsupported("[moe_check] built without CUDA");
}

MoeCheck::~MoeCheck() = default;

std::vector<float> MoeCheck::run(int64_t, const std::vector<float>&, int64_t, bool, ForwardTrace*,
                                 std::ostream*, int64_t) {
    throw_unsupported("[moe_check] built without CUDA");
}

const DeviceExpertPool& MoeCheck::pool() const {
    throw_unsupported("[moe_check] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
