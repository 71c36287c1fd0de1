// Decode GEMV kernels for MLX-affine weights on the GPU (issue 9): y = x·Wᵀ for 1-4 input rows
// (a token plus drafts), and the routed-expert SwiGLU block following an address table. The
// format is engine::AffineMatrix's (per row `cols·bits/8` code bytes as a little-endian bit
// stream; BF16 scale and bias per group; w = scale·q + bias). Activations and sums are float32.
// Every output element is summed in an order fixed by the shapes alone, so the same inputs give
// the same bits on every run. Plain C++ API: device pointers, and a cudaStream_t passed as void*
// (nullptr: the legacy default stream). Built from affine_gemv.cu with CUDA, or from
// unavailable.cpp without it, where every call throws "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>

namespace cherenkov::engine::cuda {

constexpr int kMaxGemvRows = 4;  // input rows per call (decode: token + up to 3 drafts)

// One affine matrix in device memory. codes must be 16-byte aligned (any cudaMalloc'd or
// 16-byte-aligned record offset); scales and biases 2-byte aligned.
struct DeviceAffineMatrix {
    int64_t rows = 0;
    int64_t cols = 0;                  // a multiple of group_size
    int bits = 4;                      // 2, 3, 4 or 8
    int group_size = 64;               // 32, 64 or 128
    const uint8_t* codes = nullptr;    // [rows, cols·bits/8]
    const uint16_t* scales = nullptr;  // BF16 [rows, cols/group_size]
    const uint16_t* biases = nullptr;  // BF16 [rows, cols/group_size]
};

bool affine_gemv_supports(int bits, int group_size);

// y[t·y_stride + r] = Σ_c W[r][c]·x[t·x_stride + c]   for t < n_rows (1..4), r < w.rows.
// x: device float [n_rows, x_stride], 16-byte aligned, x_stride a multiple of 4;
// y: device float [n_rows, y_stride]. Asynchronous on `stream`.
void affine_gemv(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int n_rows, float* y,
                 size_t y_stride, void* stream);

// One entry of an expert address table (the table lives in device memory, so slots can move
// without the launch changing): device addresses of one expert's three matrices, all with the
// call's ExpertShape. Alignment as for DeviceAffineMatrix.
struct ExpertAddress {
    const uint8_t* gate_codes;  // gate: [intermediate, hidden]
    const uint16_t* gate_scales;
    const uint16_t* gate_biases;
    const uint8_t* up_codes;  // up: [intermediate, hidden]
    const uint16_t* up_scales;
    const uint16_t* up_biases;
    const uint8_t* down_codes;  // down: [hidden, intermediate]
    const uint16_t* down_scales;
    const uint16_t* down_biases;
};

struct ExpertShape {
    int64_t hidden = 0;        // a multiple of group_size
    int64_t intermediate = 0;  // a multiple of group_size
    int bits = 4;
    int group_size = 64;
};

// The routed experts of one MoE layer for n_rows (1..4) rows, their per-expert outputs (the
// layer's weighted combine is moe.cu's):
//   h[e][t]     = silu(gate_e·x_t) ⊙ (up_e·x_t)
//   parts[e][t] = down_e·h[e][t]        for every e < n_experts and t < n_rows (1..4).
// table: device ExpertAddress [n_experts]; x: device float [n_rows, hidden], 16-byte aligned;
// h_scratch: device float [n_experts, n_rows, intermediate], 16-byte aligned;
// parts: device float [n_experts, n_rows, hidden]. Each output depends only on its expert's
// weights and its row, summed in an order fixed by the shape. n_in_use: null, or a device int
// written by an earlier kernel on `stream` (with the table): only entries [0, *n_in_use) are
// computed, n_experts being the table's capacity; the rest of h_scratch and parts is untouched.
void affine_experts_swiglu_parts(const ExpertShape& shape, const ExpertAddress* table,
                                 int n_experts, const float* x, int n_rows, float* h_scratch,
                                 float* parts, void* stream, const int* n_in_use = nullptr);

}  // namespace cherenkov::engine::cuda
