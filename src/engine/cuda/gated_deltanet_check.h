// A plain C++ entry to the device Gated DeltaNet (gated_deltanet.cu) for tests, which cannot
// include the CUDA headers: uploads host weights and state, runs the device layer and downloads
// what it wrote. Built from gated_deltanet.cu with CUDA, or from
// gated_deltanet_check_unavailable.cpp without it, where the call throws "built without CUDA".
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_weights.h"
#include "engine/model/sequence_state.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine::cuda {

// Runs cuda::gated_deltanet_forward once per entry of `chunk_rows` (consecutive calls on one
// device state, one stream) over mix [Σ chunk_rows, H]. Every tensor of `weights` must lie in the
// host buffer [weight_base, +weight_bytes), which is uploaded as one allocation. `state` is the
// initial state on entry and the final one on return. Outputs: y [Σ rows, H]; when non-null, the
// per-row snapshots recurrent [Σ rows, Hv·dk·dv] and conv [Σ rows, (Kc-1)·conv_dim].
void gated_deltanet_check(const model_data::qwen4_exp::Config& config,
                          const GatedDeltaNetWeights& weights, const void* weight_base,
                          uint64_t weight_bytes, GatedDeltaNetState& state, const float* mix,
                          const std::vector<int64_t>& chunk_rows, float* y,
                          float* recurrent_snapshots, float* conv_snapshots);

}  // namespace cherenkov::engine::cuda
