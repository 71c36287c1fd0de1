// Prefill matmuls on the GPU (issue 9): y = x·Wᵀ for any number of input rows, with W
// MLX-affine (the format of DeviceAffineMatrix, affine_gemv.h) or float32. Affine shapes the
// tensor-core kernels decode (2/4 bits at group 64/128, 8 bits at group 64), with 16-byte aligned
// x, go to the tensor-core GEMM (expert_gemm.h: affine_gemm_tensor_cores); the rest to a tiled
// SIMT float32 kernel, where every output element is summed over the columns in ascending order
// by one thread. Either way results are bitwise reproducible and do not depend on the number of
// rows or the tile configuration chosen for a shape. Plain
// C++ API: device pointers, and a cudaStream_t passed as void* (nullptr: the legacy default
// stream). Built from affine_gemm.cu with CUDA, or from unavailable.cpp without it,
// where every call throws "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

// A float32 matrix [rows, cols], row-major, in device memory (routers, unquantized linears).
struct DeviceF32Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    const float* data = nullptr;  // [rows, cols]
};

// y[t·y_stride + r] = Σ_c W[r][c]·x[t·x_stride + c]   for t < n_rows, r < w.rows.
// w: bits 2, 3, 4 or 8, group 32, 64 or 128, codes 4-byte aligned (16 for 2, 4 and 8 bits, as any
// DeviceAffineMatrix); x: device float [n_rows, x_stride], x_stride ≥ cols (any alignment; 16-byte
// aligned x with x_stride a multiple of 4 loads faster); y: device float [n_rows, y_stride],
// y_stride ≥ rows. n_rows 0 does nothing. Asynchronous on `stream`.
void affine_gemm(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows,
                 float* y, size_t y_stride, void* stream);

// The same product for float32 weights: 1-4 rows as a GEMV (warps along each weight row), more
// rows tiled like affine_gemm. Any shape and alignment; float4 loads where W, x and the strides
// allow them.
void f32_matmul(const DeviceF32Matrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
                size_t y_stride, void* stream);

}  // namespace cherenkov::engine::cuda
