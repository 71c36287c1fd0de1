// Internal to the CPU matmul: the pieces of the AVX2 float kernels (matmul_avx2.cpp) that the
// AVX-512 ones (matmul_avx512.cpp) share: code unpacking, the lanes' sum, the blocked kernel's
// block sizes, the decoding of a weight block into floats and the finish of a block's outputs.
// Every function is compiled for AVX2/FMA, which the AVX-512 targets include.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/half.h"
#include "engine/cpu/matmul_kernels.h"

#define CHERENKOV_AVX2 __attribute__((target("avx2,fma")))

namespace cherenkov::engine::matmul_detail {

constexpr int64_t kWeightBlock = 32;  // weight rows per decoded block
constexpr int64_t kInputBlock = 48;   // input rows per block (a multiple of both tiles' rows, of 8)
constexpr int64_t kColBlock = 256;    // columns per decoded block: a multiple of every group size
constexpr size_t kMaxGroupBytes = 128 * 8 / 8;

// 3-, 5- and 6-bit codes straddle bytes; they are unpacked with a byte shuffle of a 16-byte
// load, which may read up to 13 bytes past the group. Groups that close to the end of the
// matrix are copied to a padded buffer first.
template <int Bits>
constexpr bool kShuffleUnpack = Bits == 3 || Bits == 5 || Bits == 6;

// pshufb control for lane k: the two bytes holding code k's bits, then two zero bytes.
constexpr int shuffle_lane(int k, int bits) {
    const int byte = k * bits / 8;
    return static_cast<int>(static_cast<unsigned>(byte) | static_cast<unsigned>(byte + 1) << 8 |
                            0x80U << 16 | 0x80U << 24);
}

// Codes 8·piece .. 8·piece+7 of a code stream (they take exactly Bits bytes) as int32 lanes.
template <int Bits>
CHERENKOV_AVX2 inline __m256i unpack8(const uint8_t* codes, int64_t piece) {
    if constexpr (Bits == 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + 8 * piece));
        return _mm256_cvtepu8_epi32(bytes);
    } else if constexpr (Bits == 4) {
        uint32_t word = 0;
        std::memcpy(&word, codes + 4 * piece, 4);
        const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        return _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
            _mm256_set1_epi32(15));
    } else if constexpr (Bits == 2) {
        // A 16-bit broadcast (vpbroadcastw from memory): each 32-bit lane holds the two code
        // bytes twice, and shifts below 16 only reach the low copy.
        int16_t half = 0;
        std::memcpy(&half, codes + 2 * piece, 2);
        const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi16(half), shifts),
                                _mm256_set1_epi32(3));
    } else {
        static_assert(kShuffleUnpack<Bits>);
        const __m256i bytes = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + Bits * piece)));
        const __m256i shuffle =
            _mm256_setr_epi32(shuffle_lane(0, Bits), shuffle_lane(1, Bits), shuffle_lane(2, Bits),
                              shuffle_lane(3, Bits), shuffle_lane(4, Bits), shuffle_lane(5, Bits),
                              shuffle_lane(6, Bits), shuffle_lane(7, Bits));
        const __m256i shifts =
            _mm256_setr_epi32(0, Bits % 8, 2 * Bits % 8, 3 * Bits % 8, 4 * Bits % 8, 5 * Bits % 8,
                              6 * Bits % 8, 7 * Bits % 8);
        return _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(bytes, shuffle), shifts),
                                _mm256_set1_epi32((1 << Bits) - 1));
    }
}

// The codes of one group, moved to `padded` when the shuffle unpack could read past the matrix.
template <int Bits>
CHERENKOV_AVX2 inline const uint8_t* group_codes(const uint8_t* group, size_t group_bytes,
                                                 const uint8_t* codes_end, uint8_t* padded) {
    if constexpr (kShuffleUnpack<Bits>) {
        if (group + group_bytes + 16 > codes_end) {
            std::memcpy(padded, group, group_bytes);
            return padded;
        }
    }
    return group;
}

// hsum8 (matmul_kernels.h) of a register's eight lanes.
CHERENKOV_AVX2 inline float hsum8(__m256 v) {
    const __m128 pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 quads = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
    return _mm_cvtss_f32(_mm_add_ss(quads, _mm_shuffle_ps(quads, quads, 1)));
}

// The streaming tiles' bias terms of one group: bsum[t][r] += bias of weight row row0 + r ·
// xsum[t][group], one rounding each, in group order (matmul_kernels.h).
template <int NT, int NW>
CHERENKOV_AVX2 inline void add_bias_terms(const AffineCall& call, int64_t row0, int64_t group,
                                          __m128 (&bsum)[NT][NW]) {
    const AffineMatrix& w = *call.w;
    const float* xs = call.xsum + static_cast<size_t>(group) * call.xsum_stride;
#pragma GCC unroll 16
    for (int r = 0; r < NW; ++r) {
        const __m128 bias =
            _mm_set_ss(bf16_to_float(w.biases[(row0 + r) * w.groups_per_row() + group]));
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t)
            bsum[t][r] = _mm_fmadd_ss(bias, _mm_load_ss(xs + t), bsum[t][r]);
    }
}

// wq = scale · q for weight rows row0 .. row0+n_w-1, columns k0 .. k0+n_k-1, in runs of eight
// columns: with Interleave 1, row r's columns at wq[r · kColBlock + k] (the AVX2 tile's layout);
// with 2, rows 2p and 2p+1 alternate runs, so that one 16-float load holds both rows' eight
// columns k .. k+7 (the AVX-512 tile's; clear_missing_row zeroes a last pair's missing row).
template <int Bits, int Interleave>
CHERENKOV_AVX2 inline void decode_block(const AffineMatrix& w, int64_t row0, int64_t n_w,
                                        int64_t k0, int64_t n_k, float* wq) {
    const int64_t n_groups = w.groups_per_row();
    const int64_t n_pieces = w.group_size / 8;
    const size_t row_bytes = w.row_code_bytes();
    const size_t group_bytes = static_cast<size_t>(w.group_size) * Bits / 8;
    const uint8_t* codes_end = w.codes + static_cast<size_t>(w.rows) * row_bytes;
    alignas(16) uint8_t padded[kMaxGroupBytes + 16];
    for (int64_t r = 0; r < n_w; ++r) {
        const int64_t row = row0 + r;
        for (int64_t group = k0 / w.group_size; group < (k0 + n_k) / w.group_size; ++group) {
            const uint8_t* codes =
                group_codes<Bits>(w.codes + static_cast<size_t>(row) * row_bytes +
                                      static_cast<size_t>(group) * group_bytes,
                                  group_bytes, codes_end, padded);
            const __m256 scale = _mm256_set1_ps(bf16_to_float(w.scales[row * n_groups + group]));
            const int64_t first_run = (group * w.group_size - k0) / 8;
            float* out = wq + (r / Interleave) * Interleave * kColBlock + (r % Interleave) * 8;
            for (int64_t piece = 0; piece < n_pieces; ++piece) {
                _mm256_store_ps(
                    out + (first_run + piece) * 8 * Interleave,
                    _mm256_mul_ps(_mm256_cvtepi32_ps(unpack8<Bits>(codes, piece)), scale));
            }
        }
    }
}

// Zero floats for the missing second row of a last pair (decode_block<Bits, 2>), so the tile's
// multiplies of that half stay ordinary numbers.
inline void clear_missing_row(float* wq, int64_t n_w) {
    if (n_w % 2 == 0) return;
    float* pair = wq + (n_w / 2) * 2 * kColBlock;
    for (int64_t run = 0; run < kColBlock / 8; ++run) std::fill_n(pair + run * 16 + 8, 8, 0.0F);
}

// y for input rows t0 .. t0+n_t-1 and weight rows row0 .. row0+n_w-1 from the lane partials:
// the bias term runs over groups in order, eight input rows per vector.
CHERENKOV_AVX2 inline void finish_block(const AffineCall& call, int64_t row0, int64_t n_w,
                                        int64_t t0, int64_t n_t, const float* partial) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    for (int64_t r = 0; r < n_w; ++r) {
        const uint16_t* biases = w.biases + (row0 + r) * n_groups;
        for (int64_t t8 = 0; t8 < n_t; t8 += 8) {
            __m256 bsum = _mm256_setzero_ps();
            const float* xs = call.xsum + static_cast<size_t>(t0 + t8);
            for (int64_t group = 0; group < n_groups; ++group) {
                bsum = _mm256_fmadd_ps(
                    _mm256_set1_ps(bf16_to_float(biases[group])),
                    _mm256_loadu_ps(xs + static_cast<size_t>(group) * call.xsum_stride), bsum);
            }
            alignas(32) float bias_terms[8];
            _mm256_store_ps(bias_terms, bsum);
            for (int64_t lane = 0; lane < std::min<int64_t>(8, n_t - t8); ++lane) {
                const int64_t t = t8 + lane;
                call.y[static_cast<size_t>(t0 + t) * call.y_stride +
                       static_cast<size_t>(row0 + r)] =
                    matmul_detail::hsum8(partial + (t * kWeightBlock + r) * 8) + bias_terms[lane];
            }
        }
    }
}

}  // namespace cherenkov::engine::matmul_detail
