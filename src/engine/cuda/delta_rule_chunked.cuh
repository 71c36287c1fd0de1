// The chunked (WY) delta rule of Gated DeltaNet prefill on the GPU (delta_rule_chunked.cu): the
// same recurrence as gated_deltanet.cu's token-by-token kernel, as matrix products over chunks
// of 64 rows. It keeps no per-row states, so it serves calls without verification snapshots.
// Both forms take the DeltaRuleParams below. For the .cu files of this folder only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cherenkov::engine::cuda {

// One call's recurrence, for either form.
struct DeltaRuleParams {
    const float* conv = nullptr;   // [n_rows, conv_dim]: q̂ (scaled by 1/sqrt(dk)), k̂, v per row
    const float* b_raw = nullptr;  // [n_rows, Hv]: in_b output (before the sigmoid)
    const float* a_raw = nullptr;  // [n_rows, Hv]: in_a output
    const float* a_log = nullptr;  // [Hv]
    const float* dt_bias = nullptr;  // [Hv]
    float* state = nullptr;          // [Hv, dk, dv], updated in place
    float* heads = nullptr;          // [n_rows, Hv·dv]: o per row
    float* snapshots = nullptr;      // token by token only: [n_rows, Hv·dk·dv] or null
    int64_t n_rows = 0;
    int64_t conv_dim = 0;
    int64_t key_dim = 0;  // Hk·dk
    int64_t n_value_heads = 0;
    int64_t head_ratio = 0;  // Hv / Hk
    int64_t dk = 0;
    int64_t dv = 0;
};

// Whether delta_rule_chunked() takes key head dim `dk`: 8, 16, 32, 64 or 128. Larger heads would
// need more than the 99 KB of shared memory a block gets on sm_86/89.
bool delta_rule_chunked_supports(int64_t dk);

// Writes heads and the final state as the token-by-token recurrence does (equal up to float
// rounding), queued on `stream`. Takes ceil(n_rows / 64)·64·Hv·(dk + dv + 66) floats of
// DeviceScratch (W, Ũ, the intra-chunk matrix and two decay vectors per chunk and value head).
void delta_rule_chunked(const DeltaRuleParams& p, cudaStream_t stream);

}  // namespace cherenkov::engine::cuda
