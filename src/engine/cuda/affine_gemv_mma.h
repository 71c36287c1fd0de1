// Tensor-core decode GEMV for MLX-affine weights (used by affine_gemv.cu; see affine_gemv.h for
// the format and the public API). Same results contract as the FMA kernels: float32 inputs and
// outputs, each output summed in an order fixed by the shapes, error ≲ 1e-6 relative to
// Σ(|w| + 2|b|)|x|. Codes become exact bf16 integers, x is split into bf16 hi + lo parts, and
// mma.sync multiplies them with float32 accumulation; scale and bias are applied per group in
// float32 (scale·Σqx + bias·Σx). Covers 2-bit and 4-bit codes with groups 64/128 and 8-bit codes
// with group 64; the caller falls back to the FMA kernels elsewhere (3-bit, group 32, x
// too wide for shared memory, or --tuning gemv_mma=off).
#pragma once

#include <cstddef>

#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

// Warps adding partial sums of one tile set for a row of n_groups groups (1, 2 or 4): the
// column ranges, and so the order of every sum, that the bulk-loaded experts share.
int mma_k_split(int n_groups);

// Whether the tensor-core kernels take this (bits, group size, cols, rows of x).
bool mma_gemv_takes(int bits, int group_size, int64_t cols, int n_rows);

// y[t·y_stride + r] = W[r]·x[t]   (as affine_gemv).
void mma_gemv_dense(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int n_rows,
                    float* y, size_t y_stride, void* stream);

// h[e][t] = silu(gate_e·x_t) ⊙ (up_e·x_t) for every e < n_experts, t < n_rows. n_in_use (device
// int, or null): only entries below *n_in_use are computed (a table filled by an earlier kernel).
// x: [n_rows, hidden]; h: [n_experts, n_rows, intermediate].
void mma_experts_gate_up(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                         const float* x, int n_rows, float* h, void* stream,
                         const int* n_in_use = nullptr);

// parts[e][t] = down_e·h[e][t]. h: [n_experts, n_rows, intermediate];
// parts: [n_experts, n_rows, hidden]. Queue it right behind the mma_experts_gate_up call with the
// same table: it reads the table before waiting for that kernel (dependent_launch.cuh).
void mma_experts_down(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                      const float* h, int n_rows, float* parts, void* stream,
                      const int* n_in_use = nullptr);

}  // namespace cherenkov::engine::cuda
