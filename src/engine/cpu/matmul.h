// Matrix kernels of the CPU engine. All compute y = x·Wᵀ in float32 for `n_rows` input rows:
//   y[t·y_stride + r] = Σ_c W[r][c] · x[t·x_stride + c]      for t < n_rows, r < W.rows
// Quantized weights are dequantized group by group in registers (never materialized), so one
// pass over the weight bytes serves all n_rows inputs: decode (1-4 rows) is bound by weight
// bandwidth, prefill (many rows) amortizes it. Work is split over output rows on the pool; each
// output element is summed in a fixed order, so results do not depend on the thread count.
// AVX2/FMA (and AVX-512 VNNI) paths are chosen at run time (set_kernel_path below); a portable
// path runs elsewhere and is what tests compare the vector paths against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "engine/cpu/affine_matrix.h"

namespace cherenkov::engine {

class ThreadPool;

// How activations meet quantized weights. F32: every product in float, the order of
// matmul_kernels.h (what the reference comparisons hold to). Q8: each input row's groups are
// quantized to int8 with one scale a group and 4-bit weights multiplied in integers, about a
// quarter of the instructions (llama.cpp's Q8 activations do the same); the error is that of an
// 8-bit rounding of x. Matrices of other bit widths or group sizes run in F32 either way.
enum class ActivationPrecision { F32, Q8 };

// "f32" / "q8", and back; parse throws InvalidInput naming `what` (a flag or a key).
const char* activation_precision_name(ActivationPrecision activations);
ActivationPrecision parse_activation_precision(std::string_view text, std::string_view what);

void matmul(const AffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool,
            ActivationPrecision activations = ActivationPrecision::F32);
// Whether two affine matrices can share an input in matmul_shared_input: the same width, bits
// and group size.
bool same_input_layout(const AffineMatrix& a, const AffineMatrix& b);

// One input against several affine matrices of the same width, bits and group size, such as an
// MoE expert's gate and up, or those of several experts: x is prepared once (its group sums, or
// its int8 codes) and the rows of every matrix are split over the pool in one operation, so short
// matrices make longer streams and one start and join. ys[i] is [n_rows, ws[i]->rows]; each
// result is what matmul gives for that matrix alone, bit for bit. Throws InvalidInput for other
// shapes.
void matmul_shared_input(std::span<const AffineMatrix* const> ws, const float* x, size_t x_stride,
                         int64_t n_rows, std::span<float* const> ys, ThreadPool* pool,
                         ActivationPrecision activations = ActivationPrecision::F32);
// The same for matrices that each have their own input, such as several experts' down
// projections: xs[i] is [n_rows, ws[i]->cols] (rows contiguous), each prepared on its own (once
// where inputs repeat), and every matrix's rows split over the pool in one operation.
void matmul_each_input(std::span<const AffineMatrix* const> ws, std::span<const float* const> xs,
                       int64_t n_rows, std::span<float* const> ys, ThreadPool* pool,
                       ActivationPrecision activations = ActivationPrecision::F32);
void matmul(const F32Matrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool);

// Dequantizes one row of `w` into out[0, cols).
void dequantize_row(const AffineMatrix& w, int64_t row, float* out);

// Selects the kernel family, for the whole process: tests, benchmarks, and the engine's load
// (`--tuning cpu_avx512=off` asks for Avx2). Default: the best the CPU supports.
// Avx512 is Avx2 with the int8-activation matmul on AVX-512 VNNI and the float-activation
// affine matmul of more than four input rows on AVX-512 (the same bits, fewer
// instructions); every other kernel stays AVX2.
enum class KernelPath { Auto, Portable, Avx2, Avx512 };
void set_kernel_path(KernelPath path);          // throws Unsupported for a family the CPU lacks
KernelPath active_kernel_path();                // never Auto
const char* kernel_path_name(KernelPath path);  // "auto", "portable", "avx2", "avx512"
bool cpu_has_avx2_fma();
bool cpu_has_avx512_vnni();  // AVX-512 F, BW, DQ, VL and VNNI (with AVX2/FMA)

}  // namespace cherenkov::engine
