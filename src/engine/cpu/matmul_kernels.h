// Internal to the CPU matmul: what matmul.cpp hands to the kernel families (portable in
// matmul_portable.cpp, AVX2/FMA in matmul_avx2.cpp and matmul_q8_avx2.cpp, AVX-512 with the AVX2
// bits in matmul_avx512.cpp, AVX-512 VNNI for int8 activations in matmul_q8_avx512.cpp), and the
// summation order they share.
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
//
// Int8 activations (ActivationPrecision::Q8, 4-bit weights, groups of 64 or 128 columns): each
// input row's group g is quantized on its own, x ≈ dx[t][g] · xq with xq in [-127, 127]
// (dx = max|x| / 127, xq = x · (127 / max|x|) rounded to nearest even). Per group the integer
// lane sums are exact, so their order does not matter:
//   isum[l] = Σ q_c · xq_c   over the group's columns c with (c mod 64) / 8 = l
//   acc[l]  = fma(float(isum[l]), scale_g · dx[t][g], acc[l])   over groups in order, from 0
//   bsum    = fma(bias_g, qsum[t][g], bsum)                     over groups in order, from 0
//   y[t][r] = hsum8(acc) + bsum,   qsum[t][g] = dx[t][g] · Σ xq over the group (exact integer)
// The bias part takes the quantized x's sums, not x's own: then the rounding error of y is
// Σ w_c · e_c over x's errors e_c, not Σ scale·q_c · e_c, whose codes (0..15, not centred)
// would double it. All families follow it with fused multiply-adds: they agree bit for bit.
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

// Int8 activations for 4-bit weights. xq holds each row's groups in 64-column blocks, each block
// as its 32 even columns then its 32 odd ones: the order of the low and high nibbles of the
// block's 32 code bytes.
struct Q8Call {
    const AffineMatrix* w = nullptr;
    const int8_t* xq = nullptr;  // [n_rows, w->cols]
    const float* dx = nullptr;   // [n_rows, w->groups_per_row()]
    const float* qsum = nullptr;  // [n_rows, w->groups_per_row()]
    int64_t n_rows = 0;
    float* y = nullptr;  // [n_rows, y_stride]
    size_t y_stride = 0;
    // Set by the kernels themselves for calls of several input rows: the bias terms
    // Σ_group bias·qsum of weight rows from bias_row0 and input rows from bias_t0, already summed
    // (bias_terms[(t − bias_t0)·bias_stride + r − bias_row0]); null: each tile sums its own.
    const float* bias_terms = nullptr;
    int64_t bias_row0 = 0;
    int64_t bias_t0 = 0;
    int64_t bias_stride = 0;
};

// Whether a matrix takes the int8-activation kernels; others run in float whatever is asked.
inline bool q8_supported(const AffineMatrix& w) {
    return w.bits == 4 && (w.group_size == 64 || w.group_size == 128);
}

// Each computes y[t][r] for every t and r in [row_begin, row_end).
void affine_rows_portable(const AffineCall& call, int64_t row_begin, int64_t row_end);
void affine_rows_avx2(const AffineCall& call, int64_t row_begin, int64_t row_end);
// AVX-512 (matmul_avx512.cpp): the AVX2 kernels' bits, two weight rows to a register.
void affine_rows_avx512(const AffineCall& call, int64_t row_begin, int64_t row_end);
// Rows [row_begin, row_end) of x quantized into xq [n_rows, cols], dx and qsum [n_rows, cols /
// group_size] as Q8Call lays them out. Both families make the same bytes (the same float
// operations: |x| max, one division, one multiply, rounding to nearest even).
void quantize_q8_rows_portable(const float* x, size_t x_stride, int64_t cols, int group_size,
                               int64_t row_begin, int64_t row_end, int8_t* xq, float* dx,
                               float* qsum);
void quantize_q8_rows_avx2(const float* x, size_t x_stride, int64_t cols, int group_size,
                           int64_t row_begin, int64_t row_end, int8_t* xq, float* dx,
                           float* qsum);
void affine_q8_rows_portable(const Q8Call& call, int64_t row_begin, int64_t row_end);
void affine_q8_rows_avx2(const Q8Call& call, int64_t row_begin, int64_t row_end);
// AVX-512 VNNI (matmul_q8_avx512.cpp): the AVX2 kernel's bits at half its integer instructions.
void affine_q8_rows_avx512(const Q8Call& call, int64_t row_begin, int64_t row_end);
void f32_rows_portable(const F32Call& call, int64_t row_begin, int64_t row_end);
void f32_rows_avx2(const F32Call& call, int64_t row_begin, int64_t row_end);

// hsum8 in the order above, for kernels that keep lanes in memory.
inline float hsum8(const float* lanes) {
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
           ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

}  // namespace cherenkov::engine::matmul_detail
