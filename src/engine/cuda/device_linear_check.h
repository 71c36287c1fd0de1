// Plain-C++ doors to linear_apply and affine_matmul (device_layers.cuh, device_linear.cu) for
// code that cannot include CUDA headers: the tests. The same calls with the stream as void*
// (nullptr: the legacy default stream). Without CUDA they throw "built without CUDA".
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cuda/device_weights.h"

namespace cherenkov::engine::cuda {

// y[t, :out] = x[t]·Wᵀ (+ b) for t < n_rows; x: device [n_rows, in], y: device [n_rows, out].
void linear_apply_plain(const DeviceLinear& linear, const float* x, int64_t n_rows, float* y,
                        void* stream);

// affine_matmul: 1-4 rows through affine_gemv where its alignment allows, else affine_gemm.
void affine_matmul_plain(const DeviceAffineMatrix& w, const float* x, size_t x_stride,
                         int64_t n_rows, float* y, size_t y_stride, void* stream);

}  // namespace cherenkov::engine::cuda
