// The GPU token selection in builds without nvcc: the call throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/token_select.h"

namespace cherenkov::engine::cuda {

void token_select(const float*, int64_t, int64_t, const TokenChoice*, uint64_t*, int32_t*, void*) {
    throw_unsupported("[token_select] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
