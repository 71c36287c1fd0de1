// Internal to the CPU matmul: what matmul.cpp hands to the kernel families (portable in
// matmul_portable.cpp, AVX2/FMA in matmul_avx2.cpp), and the summation order they share.
//
// Summation order of one output y[t][r] (fixed, so results depend neither on the thread count
// nor on n_rows or on which of a family's kernels ran; only the family changes rounding):
//   acc[l]  = Σ (scale_g · q_c) · x_c   over c ≡ l (mod 8), in column order, starting from 0
//             (the product scale·q is rounded to float first; AVX2 fuses the multiply-add)
//   bsum    = Σ bias_g · xsum[t][g]      over groups g in order, starting from 0
//   y[t][r] = hsum8(acc) + bsum,  hsum8(v) = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7))
//   xsum[t][g] = hsum8 of 8 lanes summing x over the group's columns c ≡ l (mod 8) in order.
// F32 matrices: y = hsum8(acc over the first cols/8·8 columns), then the tail columns added in
// order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cpu/affine_matrix.h"

namespace cherenkov::engine::matmul_detail {

// Calls with at most this many input rows stream the weights once through a kernel that keeps
// every row's accumulators in registers; larger calls decode blocks of weights into L1 and run
// a register-tiled kernel over them. Both follow the order above, so the cut-over is invisible.
constexpr int64_t kMaxStreamingRows = 4;

// Output rows are handed to the pool in tiles of this many rows.
constexpr int64_t kRowTile = 4;

struct AffineCall {
    const AffineMatrix* w = nullptr;
    const float* x = nullptr;  // [n_rows, x_stride]
    size_t x_stride = 0;
    int64_t n_rows = 0;
    float* y = nullptr;  // [n_rows, y_stride]
    size_t y_stride = 0;
    // xsum[g · xsum_stride + t]: Σ x[t] over group g. xsum_stride ≥ n_rows is a multiple of 8
    // and the padding columns are readable (zero).
    const float* xsum = nullptr;
    size_t xsum_stride = 0;
};

struct F32Call {
    const F32Matrix* w = nullptr;
    const float* x = nullptr;
    size_t x_stride = 0;
    int64_t n_rows = 0;
    float* y = nullptr;
    size_t y_stride = 0;
};

// Each computes y[t][r] for every t and r in [row_begin, row_end).
void affine_rows_portable(const AffineCall& call, int64_t row_begin, int64_t row_end);
void affine_rows_avx2(const AffineCall& call, int64_t row_begin, int64_t row_end);
void f32_rows_portable(const F32Call& call, int64_t row_begin, int64_t row_end);
void f32_rows_avx2(const F32Call& call, int64_t row_begin, int64_t row_end);

// hsum8 in the order above, for kernels that keep lanes in memory.
inline float hsum8(const float* lanes) {
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
           ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

}  // namespace cherenkov::engine::matmul_detail
