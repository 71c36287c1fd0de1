// AVX2/FMA matmul kernels, compiled per function with target("avx2,fma") so the rest of the
// build keeps the baseline ISA; matmul.cpp calls them only when the CPU has both features.
// Summation order: matmul_kernels.h. Two affine kernels share it bit for bit:
//   streaming (n_rows ≤ 4): each group of NW weight rows is unpacked once into registers and
//     multiplied into every input row's accumulators, so weights stream from memory once;
//   blocked (more rows): a [32 weight rows × 256 columns] block is decoded (scale·q, float)
//     into L1 and a 3×4 register tile (input rows × weight rows) runs over it for every input
//     row of a 48-row block; lane accumulators persist in memory across column blocks.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/matmul_avx2_parts.h"
#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/prefetch.h"

namespace cherenkov::engine::matmul_detail {
namespace {

constexpr int kTileInputs = 3;  // register tile: 3 input rows × 4 weight rows = 12 ymm
constexpr int kTileWeights = 4;

// ---- streaming kernel (n_rows ≤ 4) -------------------------------------------------------

// Weight rows row0 .. row0+NW-1 against all NT input rows.
template <int Bits, int NT, int NW>
CHERENKOV_AVX2 void stream_tile(const AffineCall& call, int64_t row0) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    const int64_t n_pieces = w.group_size / 8;
    const size_t row_bytes = w.row_code_bytes();
    const size_t group_bytes = static_cast<size_t>(w.group_size) * Bits / 8;
    const uint8_t* codes_end = w.codes + static_cast<size_t>(w.rows) * row_bytes;
    alignas(16) uint8_t padded[NW][kMaxGroupBytes + 16];

    __m256 acc[NT][NW];
    __m128 bsum[NT][NW];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            acc[t][r] = _mm256_setzero_ps();
            bsum[t][r] = _mm_setzero_ps();
        }
    }
    for (int64_t group = 0; group < n_groups; ++group) {
        const uint8_t* codes[NW];
        __m256 scale[NW];
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            const int64_t row = row0 + r;
            const uint8_t* group_start = w.codes + static_cast<size_t>(row) * row_bytes +
                                         static_cast<size_t>(group) * group_bytes;
            // The next tile's row, a group ahead of where it will be read (prefetch.h).
            prefetch_next_tile(group_start, NW * row_bytes);
            codes[r] = group_codes<Bits>(group_start, group_bytes, codes_end, padded[r]);
            scale[r] = _mm256_set1_ps(bf16_to_float(w.scales[row * n_groups + group]));
        }
        const float* xg = call.x + static_cast<size_t>(group) * static_cast<size_t>(w.group_size);
        for (int64_t piece = 0; piece < n_pieces; ++piece) {
            __m256 xv[NT];
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) {
                xv[t] = _mm256_loadu_ps(xg + static_cast<size_t>(t) * call.x_stride + 8 * piece);
            }
#pragma GCC unroll 16
            for (int r = 0; r < NW; ++r) {
                const __m256 wq =
                    _mm256_mul_ps(_mm256_cvtepi32_ps(unpack8<Bits>(codes[r], piece)), scale[r]);
#pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) acc[t][r] = _mm256_fmadd_ps(wq, xv[t], acc[t][r]);
            }
        }
        add_bias_terms(call, row0, group, bsum);
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            call.y[static_cast<size_t>(t) * call.y_stride + static_cast<size_t>(row0 + r)] =
                hsum8(acc[t][r]) + _mm_cvtss_f32(bsum[t][r]);
        }
    }
}

template <int Bits, int NT>
CHERENKOV_AVX2 void stream_rows(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    // Four weight rows at a time give four independent FMA chains per input row; with 3-4
    // input rows, two keep the accumulators within the 16 ymm registers.
    constexpr int kRows = NT <= 2 ? 4 : 2;
    int64_t row = row_begin;
    for (; row + kRows <= row_end; row += kRows) stream_tile<Bits, NT, kRows>(call, row);
    for (; row < row_end; ++row) stream_tile<Bits, NT, 1>(call, row);
}

// ---- blocked kernel (n_rows > 4) ---------------------------------------------------------

// partial[(t · kWeightBlock + r) · 8 + lane] += wq[r] · x[t] over n_k columns, for a tile of
// NT input rows and NW weight rows.
template <int NT, int NW>
CHERENKOV_AVX2 void tile_kernel(const float* wq, const float* x, size_t x_stride, int64_t n_k,
                                float* partial) {
    __m256 acc[NT][NW];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r)
            acc[t][r] = _mm256_load_ps(partial + (t * kWeightBlock + r) * 8);
    }
    for (int64_t k = 0; k < n_k; k += 8) {
        __m256 xv[NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t)
            xv[t] = _mm256_loadu_ps(x + static_cast<size_t>(t) * x_stride + k);
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            const __m256 wv = _mm256_load_ps(wq + r * kColBlock + k);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) acc[t][r] = _mm256_fmadd_ps(wv, xv[t], acc[t][r]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r)
            _mm256_store_ps(partial + (t * kWeightBlock + r) * 8, acc[t][r]);
    }
}

using TileKernel = void (*)(const float*, const float*, size_t, int64_t, float*);
constexpr TileKernel kTileKernels[kTileInputs][kTileWeights] = {
    {tile_kernel<1, 1>, tile_kernel<1, 2>, tile_kernel<1, 3>, tile_kernel<1, 4>},
    {tile_kernel<2, 1>, tile_kernel<2, 2>, tile_kernel<2, 3>, tile_kernel<2, 4>},
    {tile_kernel<3, 1>, tile_kernel<3, 2>, tile_kernel<3, 3>, tile_kernel<3, 4>},
};

template <int Bits>
CHERENKOV_AVX2 void blocked_rows(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    const AffineMatrix& w = *call.w;
    // 32 KB + 48 KB of stack: the decoded block stays in L1, the partials in L1/L2.
    alignas(32) float wq[kWeightBlock * kColBlock];
    alignas(32) float partial[kInputBlock * kWeightBlock * 8];
    for (int64_t row0 = row_begin; row0 < row_end; row0 += kWeightBlock) {
        const int64_t n_w = std::min(kWeightBlock, row_end - row0);
        for (int64_t t0 = 0; t0 < call.n_rows; t0 += kInputBlock) {
            const int64_t n_t = std::min(kInputBlock, call.n_rows - t0);
            std::fill(partial, partial + n_t * kWeightBlock * 8, 0.0F);
            for (int64_t k0 = 0; k0 < w.cols; k0 += kColBlock) {
                const int64_t n_k = std::min(kColBlock, w.cols - k0);
                decode_block<Bits, 1>(w, row0, n_w, k0, n_k, wq);
                for (int64_t t = 0; t < n_t; t += kTileInputs) {
                    const int64_t n_tile_t = std::min<int64_t>(kTileInputs, n_t - t);
                    const float* x = call.x + static_cast<size_t>(t0 + t) * call.x_stride + k0;
                    for (int64_t r = 0; r < n_w; r += kTileWeights) {
                        const int64_t n_tile_w = std::min<int64_t>(kTileWeights, n_w - r);
                        kTileKernels[n_tile_t - 1][n_tile_w - 1](
                            wq + r * kColBlock, x, call.x_stride, n_k,
                            partial + (t * kWeightBlock + r) * 8);
                    }
                }
            }
            finish_block(call, row0, n_w, t0, n_t, partial);
        }
    }
}

template <int Bits>
CHERENKOV_AVX2 void affine_rows_bits(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    switch (call.n_rows) {
        case 1: return stream_rows<Bits, 1>(call, row_begin, row_end);
        case 2: return stream_rows<Bits, 2>(call, row_begin, row_end);
        case 3: return stream_rows<Bits, 3>(call, row_begin, row_end);
        case 4: return stream_rows<Bits, 4>(call, row_begin, row_end);
        default: return blocked_rows<Bits>(call, row_begin, row_end);
    }
}

// ---- F32 -----------------------------------------------------------------------------------

template <int NT, int NW>
CHERENKOV_AVX2 void f32_tile(const F32Call& call, int64_t row0, int64_t t0) {
    const F32Matrix& w = *call.w;
    const int64_t cols8 = w.cols / 8 * 8;
    const float* wr[NW];
    const float* xr[NT];
#pragma GCC unroll 16
    for (int r = 0; r < NW; ++r)
        wr[r] = w.data + static_cast<size_t>(row0 + r) * static_cast<size_t>(w.cols);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) xr[t] = call.x + static_cast<size_t>(t0 + t) * call.x_stride;
    __m256 acc[NT][NW];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) acc[t][r] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < cols8; k += 8) {
        __m256 xv[NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) xv[t] = _mm256_loadu_ps(xr[t] + k);
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            const __m256 wv = _mm256_loadu_ps(wr[r] + k);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) acc[t][r] = _mm256_fmadd_ps(wv, xv[t], acc[t][r]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            __m128 sum = _mm_set_ss(hsum8(acc[t][r]));
            for (int64_t c = cols8; c < w.cols; ++c) {
                sum = _mm_fmadd_ss(_mm_load_ss(wr[r] + c), _mm_load_ss(xr[t] + c), sum);
            }
            call.y[static_cast<size_t>(t0 + t) * call.y_stride + static_cast<size_t>(row0 + r)] =
                _mm_cvtss_f32(sum);
        }
    }
}

using F32Tile = void (*)(const F32Call&, int64_t, int64_t);
constexpr F32Tile kF32Tiles[kTileInputs][kTileWeights] = {
    {f32_tile<1, 1>, f32_tile<1, 2>, f32_tile<1, 3>, f32_tile<1, 4>},
    {f32_tile<2, 1>, f32_tile<2, 2>, f32_tile<2, 3>, f32_tile<2, 4>},
    {f32_tile<3, 1>, f32_tile<3, 2>, f32_tile<3, 3>, f32_tile<3, 4>},
};

}  // namespace

void affine_rows_avx2(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    switch (call.w->bits) {
        case 2: return affine_rows_bits<2>(call, row_begin, row_end);
        case 3: return affine_rows_bits<3>(call, row_begin, row_end);
        case 4: return affine_rows_bits<4>(call, row_begin, row_end);
        case 5: return affine_rows_bits<5>(call, row_begin, row_end);
        case 6: return affine_rows_bits<6>(call, row_begin, row_end);
        case 8: return affine_rows_bits<8>(call, row_begin, row_end);
        default: throw_internal("[matmul] unchecked bit width");
    }
}

void f32_rows_avx2(const F32Call& call, int64_t row_begin, int64_t row_end) {
    // Input rows in blocks that stay in L2; each 4-row tile of weights stays in L1 while the
    // block's input rows pass over it.
    for (int64_t t0 = 0; t0 < call.n_rows; t0 += kInputBlock) {
        const int64_t n_t = std::min(kInputBlock, call.n_rows - t0);
        for (int64_t r = row_begin; r < row_end; r += kTileWeights) {
            const int64_t n_tile_w = std::min<int64_t>(kTileWeights, row_end - r);
            for (int64_t t = 0; t < n_t; t += kTileInputs) {
                const int64_t n_tile_t = std::min<int64_t>(kTileInputs, n_t - t);
                kF32Tiles[n_tile_t - 1][n_tile_w - 1](call, r, t0 + t);
            }
        }
    }
}

}  // namespace cherenkov::engine::matmul_detail
