// Matrix kernels of the CPU engine. All compute y = x·Wᵀ in float32 for `n_rows` input rows:
//   y[t·y_stride + r] = Σ_c W[r][c] · x[t·x_stride + c]      for t < n_rows, r < W.rows
// Quantized weights are dequantized group by group in registers (never materialized), so one
// pass over the weight bytes serves all n_rows inputs: decode (1-4 rows) is bound by weight
// bandwidth, prefill (many rows) amortizes it. Work is split over output rows on the pool; each
// output element is summed in a fixed order, so results do not depend on the thread count.
// AVX2/FMA paths are chosen at run time (cpu_features.h); a portable path runs elsewhere and is
// what tests compare the vector paths against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cpu/affine_matrix.h"

namespace cherenkov::engine {

class ThreadPool;

void matmul(const AffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool);
void matmul(const F32Matrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool);

// Dequantizes one row of `w` into out[0, cols).
void dequantize_row(const AffineMatrix& w, int64_t row, float* out);

// Selects the kernel family; for tests and benchmarks. Default: the best the CPU supports.
enum class KernelPath { Auto, Portable, Avx2 };
void set_kernel_path(KernelPath path);
KernelPath active_kernel_path();  // never Auto
bool cpu_has_avx2_fma();

}  // namespace cherenkov::engine
