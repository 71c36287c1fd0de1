// AVX-512 kernels for float activations against affine weights, in the AVX2 kernels' order
// (matmul_kernels.h) and with their bits. A zmm register holds the eight lane accumulators of
// two weight rows side by side: the blocked kernel decodes a block of weights with rows paired
// (decode_block<Bits, 2>), so one 64-byte load gives two rows' eight columns, and an input row's
// eight columns are broadcast to both halves. Each lane then takes the same fused multiply-adds
// in the same order as in the AVX2 tile, at half the instructions, and a 4 × 4 register tile (4
// input rows × 4 pairs of weight rows, 16 zmm) fits the 32 registers where AVX2's 16 ymm hold 3
// × 4 rows. Calls of up to kMaxStreamingRows input rows stream 4-bit weights through pairs of
// rows the same way; other widths keep the AVX2 streaming kernel.
// GCC 12's AVX-512 headers build 512-to-256-bit casts and extracts on a self-initialized
// "undefined" pass-through, which -W(maybe-)uninitialized reports at every inlined use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "engine/cpu/matmul_avx2_parts.h"
#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/prefetch.h"

#define CHERENKOV_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

namespace cherenkov::engine::matmul_detail {
namespace {

constexpr int kTileInputs = 4;  // register tile: 4 input rows × 4 pairs of weight rows = 16 zmm
constexpr int kTilePairs = 4;

// partial[(t · kWeightBlock + r) · 8 + lane] += wq[r] · x[t] over n_k columns for NT input rows
// and the NP pairs of weight rows at wq (paired layout); a pair's two rows are adjacent in the
// partials, so each (t, pair) is one 64-byte load and store.
template <int NT, int NP>
CHERENKOV_AVX512 void pair_tile_kernel(const float* wq, const float* x, size_t x_stride,
                                       int64_t n_k, float* partial) {
    __m512 acc[NT][NP];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p)
            acc[t][p] = _mm512_load_ps(partial + (t * kWeightBlock + 2 * p) * 8);
    }
    for (int64_t k = 0; k < n_k; k += 8) {
        __m512 xv[NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            xv[t] =
                _mm512_broadcast_f32x8(_mm256_loadu_ps(x + static_cast<size_t>(t) * x_stride + k));
        }
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p) {
            const __m512 wv = _mm512_load_ps(wq + p * 2 * kColBlock + 2 * k);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) acc[t][p] = _mm512_fmadd_ps(wv, xv[t], acc[t][p]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p)
            _mm512_store_ps(partial + (t * kWeightBlock + 2 * p) * 8, acc[t][p]);
    }
}

using PairTileKernel = void (*)(const float*, const float*, size_t, int64_t, float*);
constexpr PairTileKernel kPairTileKernels[kTileInputs][kTilePairs] = {
    {pair_tile_kernel<1, 1>, pair_tile_kernel<1, 2>, pair_tile_kernel<1, 3>,
     pair_tile_kernel<1, 4>},
    {pair_tile_kernel<2, 1>, pair_tile_kernel<2, 2>, pair_tile_kernel<2, 3>,
     pair_tile_kernel<2, 4>},
    {pair_tile_kernel<3, 1>, pair_tile_kernel<3, 2>, pair_tile_kernel<3, 3>,
     pair_tile_kernel<3, 4>},
    {pair_tile_kernel<4, 1>, pair_tile_kernel<4, 2>, pair_tile_kernel<4, 3>,
     pair_tile_kernel<4, 4>},
};

// The AVX2 blocked kernel's loops (matmul_avx2.cpp) over paired blocks and pair tiles.
template <int Bits>
CHERENKOV_AVX512 void paired_blocked_rows(const AffineCall& call, int64_t row_begin,
                                          int64_t row_end) {
    const AffineMatrix& w = *call.w;
    alignas(64) float wq[kWeightBlock * kColBlock];
    alignas(64) float partial[kInputBlock * kWeightBlock * 8];
    for (int64_t row0 = row_begin; row0 < row_end; row0 += kWeightBlock) {
        const int64_t n_w = std::min(kWeightBlock, row_end - row0);
        const int64_t n_pairs = (n_w + 1) / 2;
        for (int64_t t0 = 0; t0 < call.n_rows; t0 += kInputBlock) {
            const int64_t n_t = std::min(kInputBlock, call.n_rows - t0);
            // A missing last row's partials are summed but never read.
            std::fill(partial, partial + n_t * kWeightBlock * 8, 0.0F);
            for (int64_t k0 = 0; k0 < w.cols; k0 += kColBlock) {
                const int64_t n_k = std::min(kColBlock, w.cols - k0);
                decode_block<Bits, 2>(w, row0, n_w, k0, n_k, wq);
                clear_missing_row(wq, n_w);
                for (int64_t t = 0; t < n_t; t += kTileInputs) {
                    const int64_t n_tile_t = std::min<int64_t>(kTileInputs, n_t - t);
                    const float* x = call.x + static_cast<size_t>(t0 + t) * call.x_stride + k0;
                    for (int64_t p = 0; p < n_pairs; p += kTilePairs) {
                        const int64_t n_tile_p = std::min<int64_t>(kTilePairs, n_pairs - p);
                        kPairTileKernels[n_tile_t - 1][n_tile_p - 1](
                            wq + p * 2 * kColBlock, x, call.x_stride, n_k,
                            partial + (t * kWeightBlock + 2 * p) * 8);
                    }
                }
            }
            finish_block(call, row0, n_w, t0, n_t, partial);
        }
    }
}

// ---- streaming kernel (n_rows ≤ kMaxStreamingRows, 4-bit) -----------------------------------

// The AVX2 streaming tile (matmul_avx2.cpp) for weight rows row0 .. row0+2·NP-1 against NT input
// rows, two rows to a register: a piece's eight codes of both rows are unpacked, converted and
// scaled as sixteen lanes, and each input row's eight columns, broadcast to both halves, are
// multiplied in with one fused multiply-add for both rows: a third fewer instructions. On the
// 2-core Xeon that is within noise of AVX2 at one input row and faster at two to four (MTP's
// verification), where the instructions rather than memory bound the kernel.
template <int NT, int NP>
CHERENKOV_AVX512 void pair_stream_tile(const AffineCall& call, int64_t row0) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    const int64_t n_pieces = w.group_size / 8;
    const size_t row_bytes = w.row_code_bytes();
    const size_t group_bytes = static_cast<size_t>(w.group_size) / 2;
    const __m512i shifts =
        _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i low_nibble = _mm512_set1_epi32(15);

    __m512 acc[NT][NP];
    __m128 bsum[NT][2 * NP];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p) acc[t][p] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int r = 0; r < 2 * NP; ++r) bsum[t][r] = _mm_setzero_ps();
    }
    for (int64_t group = 0; group < n_groups; ++group) {
        const uint8_t* codes[2 * NP];
#pragma GCC unroll 16
        for (int r = 0; r < 2 * NP; ++r) {
            codes[r] = w.codes + static_cast<size_t>(row0 + r) * row_bytes +
                       static_cast<size_t>(group) * group_bytes;
            prefetch_next_tile(codes[r], 2 * NP * row_bytes);  // as the AVX2 tile (prefetch.h)
        }
        __m512 scale[NP];
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p) {
            scale[p] = _mm512_insertf32x8(
                _mm512_set1_ps(bf16_to_float(w.scales[(row0 + 2 * p) * n_groups + group])),
                _mm256_set1_ps(bf16_to_float(w.scales[(row0 + 2 * p + 1) * n_groups + group])), 1);
        }
        const float* xg = call.x + static_cast<size_t>(group) * static_cast<size_t>(w.group_size);
        for (int64_t piece = 0; piece < n_pieces; ++piece) {
            __m512 xv[NT];
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) {
                xv[t] = _mm512_broadcast_f32x8(
                    _mm256_loadu_ps(xg + static_cast<size_t>(t) * call.x_stride + 8 * piece));
            }
#pragma GCC unroll 16
            for (int p = 0; p < NP; ++p) {
                uint32_t first = 0;
                uint32_t second = 0;
                std::memcpy(&first, codes[2 * p] + 4 * piece, 4);
                std::memcpy(&second, codes[2 * p + 1] + 4 * piece, 4);
                const __m512i words =
                    _mm512_inserti64x4(_mm512_set1_epi32(static_cast<int>(first)),
                                       _mm256_set1_epi32(static_cast<int>(second)), 1);
                const __m512 wq = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(
                                                    _mm512_srlv_epi32(words, shifts), low_nibble)),
                                                scale[p]);
#pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) acc[t][p] = _mm512_fmadd_ps(wq, xv[t], acc[t][p]);
            }
        }
        add_bias_terms(call, row0, group, bsum);
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        float* y = call.y + static_cast<size_t>(t) * call.y_stride + static_cast<size_t>(row0);
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p) {
            y[2 * p] = hsum8(_mm512_castps512_ps256(acc[t][p])) + _mm_cvtss_f32(bsum[t][2 * p]);
            y[2 * p + 1] =
                hsum8(_mm512_extractf32x8_ps(acc[t][p], 1)) + _mm_cvtss_f32(bsum[t][2 * p + 1]);
        }
    }
}

// Tiles of kPairs pairs of rows (four independent chains a row with one or two input rows, as
// the AVX2 kernel's four rows; two pairs with more), then single pairs, then a last odd row on
// the AVX2 kernel.
template <int NT>
CHERENKOV_AVX512 void pair_stream_rows(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    constexpr int kPairs = NT <= 2 ? 4 : 2;
    int64_t row = row_begin;
    for (; row + 2 * kPairs <= row_end; row += 2 * kPairs) pair_stream_tile<NT, kPairs>(call, row);
    for (; row + 2 <= row_end; row += 2) pair_stream_tile<NT, 1>(call, row);
    if (row < row_end) affine_rows_avx2(call, row, row_end);
}

}  // namespace

void affine_rows_avx512(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    if (call.n_rows <= kMaxStreamingRows) {
        // Only 4-bit codes have the paired streaming tile; other widths stream on AVX2.
        if (call.w->bits != 4) return affine_rows_avx2(call, row_begin, row_end);
        switch (call.n_rows) {
            case 1: return pair_stream_rows<1>(call, row_begin, row_end);
            case 2: return pair_stream_rows<2>(call, row_begin, row_end);
            case 3: return pair_stream_rows<3>(call, row_begin, row_end);
            default: return pair_stream_rows<4>(call, row_begin, row_end);
        }
    }
    switch (call.w->bits) {
        case 2: return paired_blocked_rows<2>(call, row_begin, row_end);
        case 3: return paired_blocked_rows<3>(call, row_begin, row_end);
        case 4: return paired_blocked_rows<4>(call, row_begin, row_end);
        case 5: return paired_blocked_rows<5>(call, row_begin, row_end);
        case 6: return paired_blocked_rows<6>(call, row_begin, row_end);
        case 8: return paired_blocked_rows<8>(call, row_begin, row_end);
        default: throw_internal("[matmul] unchecked bit width");
    }
}

}  // namespace cherenkov::engine::matmul_detail
