// A host-side handle on the GPU QSA layer (device_layers.cuh sparse_attention_forward) for tests:
// host weights and rows in, device cache kept between calls, outputs and cache contents copied
// back. Plain C++, so tests/engine/cuda/ compiles in every build. Built from sparse_attention.cu
// with CUDA, or from sparse_attention_check_unavailable.cpp without it, where the constructor
// throws Unsupported "built without CUDA".
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model/forward_trace.h"
#include "engine/model/model_weights.h"
#include "engine/model/sequence_state.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine::cuda {

class SparseAttentionCheck {
public:
    // Every tensor of `weights` lies in [host_base, host_base + n_bytes), which is uploaded as
    // one buffer (host_base need not outlive the constructor). The device cache holds `capacity`
    // tokens. `config` must outlive this object.
    SparseAttentionCheck(const model_data::qwen4_exp::Config& config,
                         const SparseAttentionWeights& weights, const void* host_base,
                         uint64_t n_bytes, int64_t capacity);
    ~SparseAttentionCheck();
    SparseAttentionCheck(const SparseAttentionCheck&) = delete;
    SparseAttentionCheck& operator=(const SparseAttentionCheck&) = delete;

    // y [T, H] of the device layer for mix [T, H] at positions [first_position, +T); the cache
    // grows by T. `trace` (may be null) receives the layer's trace values ("qsa.margin", ...).
    // Throws what the device function throws (Internal when first_position is not the length).
    std::vector<float> forward(const float* mix, int64_t n_rows, int64_t first_position,
                               ForwardTrace* trace);
    // DeviceAttentionCache::truncate.
    void truncate(int64_t n);
    // The valid part of the device cache as an engine::AttentionCache.
    AttentionCache download_cache() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cherenkov::engine::cuda
