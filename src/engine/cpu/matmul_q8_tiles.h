// Internal to the int8-activation kernels (matmul_q8_avx2.cpp, matmul_q8_avx512.cpp): what both
// families share around their inner loops, so they tile the work and finish each output the same
// way (matmul_kernels.h's order): the BF16 scales and the steps of an octet of groups, the fold,
// the bias term and the final sum of a tile, and the split of a row range into tiles. Each family
// supplies its tile as Tile<NT, NW, Blocks>::run(call, row0, t0): y for input rows t0 .. t0+NT-1
// and weight rows row0 .. row0+NW-1, Blocks = group_size / 64, and picks the NT × NW its
// registers hold (rows_of_any_group).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "engine/cpu/matmul_kernels.h"

namespace cherenkov::engine::matmul_detail::q8 {

#define CHERENKOV_Q8_AVX2 __attribute__((target("avx2,fma")))

// Input rows per block: their activations (64 × cols bytes) stay in L2 while every weight row of
// the range passes over them.
constexpr int64_t kInputBlock = 64;

// Up to eight BF16 scales (n of them; the rest of the lanes zero) as floats.
CHERENKOV_Q8_AVX2 inline __m256 scales_of_octet(const uint16_t* scales, int64_t n) {
    __m128i bits;
    if (n == 8) {
        bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
    } else {
        alignas(16) uint16_t padded[8] = {};
        std::memcpy(padded, scales, static_cast<size_t>(n) * sizeof(uint16_t));
        bits = _mm_load_si128(reinterpret_cast<const __m128i*>(padded));
    }
    // BF16 is the high half of a float.
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// Up to eight floats (n of them; the rest zero).
CHERENKOV_Q8_AVX2 inline __m256 floats_of_octet(const float* values, int64_t n) {
    if (n == 8) return _mm256_loadu_ps(values);
    alignas(32) float padded[8] = {};
    std::memcpy(padded, values, static_cast<size_t>(n) * sizeof(float));
    return _mm256_load_ps(padded);
}

// Writes steps[t][r][j] for the octet of groups starting at `group` (a multiple of 8): the scale
// of group + j of weight row row0 + r times dx[t] of that group, one float multiply, so every
// family folds with the same value. Why memory and not registers: each group's fold then reads
// its step as a broadcast load, which the load ports serve, where picking the lane out of a
// register is a shuffle on a port the integer work already crowds; and the registers hold a
// larger tile instead.
template <int NT, int NW>
CHERENKOV_Q8_AVX2 inline void store_steps(const AffineMatrix& w, int64_t row0,
                                          const float* const (&dx)[NT], int64_t group,
                                          float (&steps)[NT][NW][8]) {
    const int64_t n_groups = w.groups_per_row();
    const int64_t n = std::min<int64_t>(8, n_groups - group);
    __m256 dx_octet[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) dx_octet[t] = floats_of_octet(dx[t] + group, n);
#pragma GCC unroll 16
    for (int r = 0; r < NW; ++r) {
        const __m256 scales = scales_of_octet(w.scales + (row0 + r) * n_groups + group, n);
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t)
            _mm256_store_ps(steps[t][r], _mm256_mul_ps(scales, dx_octet[t]));
    }
}

// Folds one group's eight exact lane sums, already floats, into the float lanes:
// acc += sums · step.
CHERENKOV_Q8_AVX2 inline void fold(__m256& acc, __m256 sums, float step) {
    acc = _mm256_fmadd_ps(sums, _mm256_set1_ps(step), acc);
}

// A tile's rows: the codes of weight rows row0 .. row0+NW-1, and the int8 activations and their
// steps of input rows t0 .. t0+NT-1.
template <int NT, int NW>
struct TileRows {
    const uint8_t* codes[NW];
    const int8_t* xq[NT];
    const float* dx[NT];

    TileRows(const Q8Call& call, int64_t row0, int64_t t0) {
        const AffineMatrix& w = *call.w;
        const size_t row_bytes = w.row_code_bytes();
        const auto n_groups = static_cast<size_t>(w.groups_per_row());
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) codes[r] = w.codes + static_cast<size_t>(row0 + r) * row_bytes;
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            xq[t] = call.xq + static_cast<size_t>(t0 + t) * static_cast<size_t>(w.cols);
            dx[t] = call.dx + static_cast<size_t>(t0 + t) * n_groups;
        }
    }
};

// Every lane of a tile's float accumulators zero.
template <int NT, int NW>
CHERENKOV_Q8_AVX2 inline void clear(__m256 (&lanes)[NT][NW]) {
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) lanes[t][r] = _mm256_setzero_ps();
    }
}

// y[t0 + t][row0 + r] = hsum8(acc[t][r]) + the bias term, which is summed here in group order
// with every (t, r) chain interleaved so that their fused multiply-adds overlap.
template <int NT, int NW>
CHERENKOV_Q8_AVX2 inline void finish_tile(const Q8Call& call, int64_t row0, int64_t t0,
                                          const __m256 (&acc)[NT][NW]) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    __m128 bsum[NT][NW];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) bsum[t][r] = _mm_setzero_ps();
    }
    if (call.bias_terms != nullptr) {  // summed already (bias_terms below)
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            const float* terms = call.bias_terms + (t0 + t - call.bias_t0) * call.bias_stride +
                                 (row0 - call.bias_row0);
#pragma GCC unroll 16
            for (int r = 0; r < NW; ++r) bsum[t][r] = _mm_set_ss(terms[r]);
        }
    } else {
        for (int64_t group = 0; group < n_groups; ++group) {
            const float* xs = call.qsum + group;
#pragma GCC unroll 16
            for (int r = 0; r < NW; ++r) {
                const __m128 bias =
                    _mm_set_ss(bf16_to_float(w.biases[(row0 + r) * n_groups + group]));
#pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) {
                    bsum[t][r] =
                        _mm_fmadd_ss(bias, _mm_load_ss(xs + (t0 + t) * n_groups), bsum[t][r]);
                }
            }
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[t][r]);
            call.y[static_cast<size_t>(t0 + t) * call.y_stride + static_cast<size_t>(row0 + r)] =
                hsum8(lanes) + _mm_cvtss_f32(bsum[t][r]);
        }
    }
}

// The bias terms of weight rows [row_begin, row_end) against input rows [t_begin, t_end) into
// out[(t − t_begin)·(row_end − row_begin) + r − row_begin]: each Σ_group bias·qsum as one chain
// of fused multiply-adds in group order from zero, as finish_tile sums it (the same bits), but
// eight weight rows to a vector and six input rows' chains interleaved. Why: inside a tile the
// few chains of its NT × NW outputs are bound by the FMA latency, 13% of a prefill's time.
CHERENKOV_Q8_AVX2 inline void bias_terms(const Q8Call& call, int64_t row_begin, int64_t row_end,
                                         int64_t t_begin, int64_t t_end, float* out) {
    constexpr int kChains = 6;
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    const int64_t stride = row_end - row_begin;
    thread_local std::vector<float> by_group;  // [group][8 rows], the rows' biases as floats
    by_group.resize(static_cast<size_t>(n_groups * 8));
    for (int64_t r8 = row_begin; r8 < row_end; r8 += 8) {
        const int lanes = static_cast<int>(std::min<int64_t>(8, row_end - r8));
        std::fill(by_group.begin(), by_group.end(), 0.0F);
        for (int lane = 0; lane < lanes; ++lane) {
            const uint16_t* b = w.biases + (r8 + lane) * n_groups;
            for (int64_t group = 0; group < n_groups; ++group)
                by_group[static_cast<size_t>(group * 8 + lane)] = bf16_to_float(b[group]);
        }
        for (int64_t t = t_begin; t < t_end; t += kChains) {
            const int chains = static_cast<int>(std::min<int64_t>(kChains, t_end - t));
            const float* qs[kChains];
            for (int k = 0; k < kChains; ++k) {
                // Chains past the end repeat the last row (valid memory); never stored.
                qs[k] = call.qsum + std::min<int64_t>(t + k, t_end - 1) * n_groups;
            }
            __m256 acc[kChains];
#pragma GCC unroll 8
            for (int k = 0; k < kChains; ++k) acc[k] = _mm256_setzero_ps();
            for (int64_t group = 0; group < n_groups; ++group) {
                const __m256 b = _mm256_loadu_ps(by_group.data() + group * 8);
#pragma GCC unroll 8
                for (int k = 0; k < kChains; ++k)
                    acc[k] = _mm256_fmadd_ps(b, _mm256_broadcast_ss(qs[k] + group), acc[k]);
            }
            for (int k = 0; k < chains; ++k) {
                alignas(32) float lane_values[8];
                _mm256_store_ps(lane_values, acc[k]);
                float* o = out + (t + k - t_begin) * stride + (r8 - row_begin);
                std::copy(lane_values, lane_values + lanes, o);
            }
        }
    }
}

// Tile<N, NW, Blocks> over input rows [t, t + n) for the last n < NT rows of a block.
template <template <int, int, int> class Tile, int NW, int Blocks, int N>
void last_input_rows(const Q8Call& call, int64_t row0, int64_t t, int64_t n) {
    if constexpr (N > 0) {
        if (n == N) return Tile<N, NW, Blocks>::run(call, row0, t);
        last_input_rows<Tile, NW, Blocks, N - 1>(call, row0, t, n);
    }
}

// Weight rows row0 .. row0+NW-1 against input rows [t_begin, t_end), NT at a time.
template <template <int, int, int> class Tile, int NT, int NW, int Blocks>
void input_rows(const Q8Call& call, int64_t row0, int64_t t_begin, int64_t t_end) {
    int64_t t = t_begin;
    for (; t + NT <= t_end; t += NT) Tile<NT, NW, Blocks>::run(call, row0, t);
    last_input_rows<Tile, NW, Blocks, NT - 1>(call, row0, t, t_end - t);
}

// The last n < NW weight rows of a range, from row0, against input rows [t_begin, t_end).
template <template <int, int, int> class Tile, int NT, int NW, int Blocks>
void last_weight_rows(const Q8Call& call, int64_t row0, int64_t n, int64_t t_begin, int64_t t_end) {
    if constexpr (NW > 0) {
        if (n == NW) return input_rows<Tile, NT, NW, Blocks>(call, row0, t_begin, t_end);
        last_weight_rows<Tile, NT, NW - 1, Blocks>(call, row0, n, t_begin, t_end);
    }
}

// Rows [row_begin, row_end). One input row (decode): four weight rows share each load of its
// activations. More: NW weight rows (in L1) pass over a block of input rows (in L2), NT input
// rows sharing each unpacked weight group (the family's register tile).
template <template <int, int, int> class Tile, int NT, int NW, int Blocks>
void rows(const Q8Call& call, int64_t row_begin, int64_t row_end) {
    if (call.n_rows == 1) {
        int64_t row = row_begin;
        for (; row + 4 <= row_end; row += 4) Tile<1, 4, Blocks>::run(call, row, 0);
        for (; row < row_end; ++row) Tile<1, 1, Blocks>::run(call, row, 0);
        return;
    }
    thread_local std::vector<float> terms;
    Q8Call with_terms = call;
    with_terms.bias_row0 = row_begin;
    with_terms.bias_stride = row_end - row_begin;
    for (int64_t b0 = 0; b0 < call.n_rows; b0 += kInputBlock) {
        const int64_t b1 = std::min(call.n_rows, b0 + kInputBlock);
        terms.resize(static_cast<size_t>((b1 - b0) * (row_end - row_begin)));
        bias_terms(call, row_begin, row_end, b0, b1, terms.data());
        with_terms.bias_terms = terms.data();
        with_terms.bias_t0 = b0;
        int64_t row = row_begin;
        for (; row + NW <= row_end; row += NW)
            input_rows<Tile, NT, NW, Blocks>(with_terms, row, b0, b1);
        last_weight_rows<Tile, NT, NW - 1, Blocks>(with_terms, row, row_end - row, b0, b1);
    }
}

// A family's entry point: its NT × NW tiles over [row_begin, row_end) for group size 64 or 128.
template <template <int, int, int> class Tile, int NT, int NW>
void rows_of_any_group(const Q8Call& call, int64_t row_begin, int64_t row_end) {
    if (call.w->group_size == 128) return rows<Tile, NT, NW, 2>(call, row_begin, row_end);
    rows<Tile, NT, NW, 1>(call, row_begin, row_end);
}

}  // namespace cherenkov::engine::matmul_detail::q8
