// The GPU QSA check handle in builds without nvcc: construction throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/sparse_attention_check.h"

namespace cherenkov::engine::cuda {

struct SparseAttentionCheck::Impl {};

SparseAttentionCheck::SparseAttentionCheck(const model_data::qwen4_exp::Config&,
                                           const SparseAttentionWeights&, const void*, uint64_t,
                                           int64_t) {
    throw_unsupported("[sparse_attention] built without CUDA");
}

SparseAttentionCheck::~SparseAttentionCheck() = default;

std::vector<float> SparseAttentionCheck::forward(const float*, int64_t, int64_t, ForwardTrace*) {
    throw_unsupported("[sparse_attention] built without CUDA");
}

void SparseAttentionCheck::truncate(int64_t) {
    throw_unsupported("[sparse_attention] built without CUDA");
}

AttentionCache SparseAttentionCheck::download_cache() const {
    throw_unsupported("[sparse_attention] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
