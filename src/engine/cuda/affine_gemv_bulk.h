// Hopper decode GEMV for MLX-affine weights with every weight of a launch asked for up front
// (used by affine_gemv.cu; see affine_gemv.h for the format and the public API). The arithmetic
// of the tensor-core kernels of affine_gemv_mma.h, in the same order, so its results are bitwise
// those of mma_gemv_dense / mma_experts_*; what differs is how the weights arrive. Each block
// copies all of its rows' codes, scales and biases into shared memory with cp.async at its start
// (two copy groups: the first halves of the warps' column ranges are multiplied while the second
// halves land), instead of the two groups per lane a register pipeline holds in flight. Launches
// use programmatic dependent launch: the down launch (and dense matrices, whose weights never
// change) start their weight copies while the previous kernel finishes and wait for it only
// before reading x. Needs sm_90 (griddepcontrol); the caller falls back to the tensor-core
// kernels elsewhere, when a block's rows do not fit the shared-memory budget, or with
// --tuning gemv_bulk=off.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

// Whether the bulk kernels take a matrix of `rows` × `cols` (one expert matrix or a dense one)
// at this (bits, group size, rows of x) on the current device.
bool bulk_gemv_takes(int bits, int group_size, int64_t rows, int64_t cols, int n_rows);

// The column slices a dense matrix's rows are cut into, one per block of a thread block cluster
// (1: no cluster; 0: the bulk kernels do not take the shape). Matrices with too few rows to give
// every multiprocessor a block ([320, 10240], [4, 10240]) are cut; the cluster adds its slices'
// sums in rank order, so results stay reproducible. --tuning gemv_slices=off turns it off.
int bulk_gemv_column_slices(int bits, int group_size, int64_t rows, int64_t cols, int n_rows);

// Both expert launches (gate/up with SwiGLU, then down) of `shape` at n_rows.
bool bulk_experts_take(const ExpertShape& shape, int n_rows);

// y[t·y_stride + r] = W[r]·x[t]   (as affine_gemv). With x_silu_scale ≠ 0 the input is
// silu(x_silu_scale · x[t]), taken as x is read (the hyper-connection's up projection; the same
// bits as writing the activation first).
void bulk_gemv_dense(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int n_rows,
                     float* y, size_t y_stride, void* stream, float x_silu_scale = 0.0F);

// h[e][t] = silu(gate_e·x_t) ⊙ (up_e·x_t) for every e < n_experts, t < n_rows. n_in_use (device
// int, or null): only entries below *n_in_use are computed (a table filled by an earlier kernel).
// x: [n_rows, hidden]; h: [n_experts, n_rows, intermediate].
void bulk_experts_gate_up(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                          const float* x, int n_rows, float* h, void* stream,
                          const int* n_in_use = nullptr);

// parts[e][t] = down_e·h[e][t]. h: [n_experts, n_rows, intermediate];
// parts: [n_experts, n_rows, hidden].
void bulk_experts_down(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                       const float* h, int n_rows, float* parts, void* stream,
                       const int* n_in_use = nullptr);

}  // namespace cherenkov::engine::cuda
