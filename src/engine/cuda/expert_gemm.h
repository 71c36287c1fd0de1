// Tensor-core prefill GEMM (issue 9): the routed experts grouped by expert, and dense matrices
// (affine_gemm_tensor_cores, at the end). For the experts of a prefill call every pending
// expert's (row, slot) list is multiplied by its gate/up and then its down matrix in two
// launches, tokens grouped by expert, so each expert's weights are read once per token tile of
// up to kExpertTokenTile rows instead of once per 4 rows. Each launch first stages its x as B
// fragments and group sums in stream-ordered scratch (4 bytes a column of every row it reads). Same
// results contract as the decode GEMV (affine_gemv_mma.h): float32 in and out, codes as exact bf16
// integers times x split into bf16 hi + lo on the tensor cores, scale·Σqx + bias·Σx per group in
// float32, and every output summed in an order fixed by the shapes (bitwise reproducible,
// independent of which other experts or tokens share the launch). Plain C++ API: device pointers,
// and a cudaStream_t passed as void*. Built from expert_gemm.cu with CUDA, or from unavailable.cpp
// without it, where the launches throw "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

// Tokens of one block: two mma n-blocks of 8.
constexpr int kExpertTokenTile = 16;

// One block's share of the tokens: (row, slot) indices slots[first, first + count) of the expert
// at address-table entry `expert`, count in 1..kExpertTokenTile.
struct ExpertTokenTile {
    int32_t expert;
    int32_t first;
    int32_t count;
};

// Whether the grouped kernels take experts of this shape on the current device: bits 2 and 4
// with group 64 or 128, bits 8 with group 64, sm_80 or newer. Elsewhere the caller computes the
// experts one at a time (affine_matmul).
bool expert_gemm_takes(const ExpertShape& shape);

// The tensors both launches share. table: device ExpertAddress [*], all experts of `shape`;
// tiles: device ExpertTokenTile [n_tiles]; slots: device int32 [n_slots = T·k], the (row, slot)
// indices i = row·top + slot grouped by expert. tile_count: null, or a device int32 holding how
// many of the n_tiles are in use, for tiles built on the device (n_tiles is then their bound,
// max_expert_token_tiles).
struct ExpertGemmTiles {
    ExpertShape shape;
    const ExpertAddress* table = nullptr;
    const ExpertTokenTile* tiles = nullptr;
    int n_tiles = 0;
    const int32_t* slots = nullptr;
    int64_t n_slots = 0;
    const int32_t* tile_count = nullptr;
};

// h[i] = silu(gate_e·mix[i / top]) ⊙ (up_e·mix[i / top]) for every i of every tile (e the
// tile's expert). mix: device float [T, hidden], 16-byte aligned; h: device float
// [T·k, intermediate] (rows not in a tile are left as they are).
void expert_gemm_gate_up(const ExpertGemmTiles& tiles, const float* mix, int top, float* h,
                         void* stream);

// parts[i] = down_e·h[i] for every i of every tile. h: device float [T·k, intermediate],
// 16-byte aligned; parts: device float [T·k, hidden].
void expert_gemm_down(const ExpertGemmTiles& tiles, const float* h, float* parts, void* stream);

// The same kernel for a dense matrix in prefill: y[t·y_stride + r] = Σ_c W[r][c]·x[t·x_stride + c]
// for t < n_rows, tokens in tiles of 32, each output summed in one order fixed by
// the shape (bitwise reproducible, independent of n_rows and of which tokens share a tile). A
// matrix of few rows (under 8 row blocks of 128) has its columns cut into up to 8 splits of whole
// 256-column chunks, summed apart and then added in split order, so that its few blocks per
// token tile still fill the GPU.
// affine_gemm() takes it when affine_gemm_tensor_cores_take() says so: a shape the tensor-core
// kernels decode, x 16-byte aligned with x_stride a multiple of 4, sm_80 or newer, and
// --tuning gemm_mma not off (which keeps the SIMT kernel, for A/B runs).
bool affine_gemm_tensor_cores_take(const DeviceAffineMatrix& w, const float* x, size_t x_stride);
void affine_gemm_tensor_cores(const DeviceAffineMatrix& w, const float* x, size_t x_stride,
                              int64_t n_rows, float* y, size_t y_stride, void* stream);

}  // namespace cherenkov::engine::cuda
