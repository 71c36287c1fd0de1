// AVX2 row quantizer (row_quantizer_avx2.h). Compiled with target("avx2") only, not "fma": with
// FMA enabled the compiler may fuse a multiply and an add, and the bytes must equal the portable
// quantizer's.
#include "store/packer/row_quantizer_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/half.h"

#define CHERENKOV_AVX2 __attribute__((target("avx2")))

namespace cherenkov::store {

namespace {

CHERENKOV_AVX2 inline float horizontal_min(__m256 v) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_min_ss(m, _mm_shuffle_ps(m, m, 1)));
}

CHERENKOV_AVX2 inline float horizontal_max(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

// Eight codes (one per byte of `bytes`, each < 2^Bits) packed into Bits bytes, code k at stream
// bits [k·Bits, k·Bits + Bits): in 16-, then 32-, then 64-bit lanes, the upper half-lane's value
// moves down next to the lower one's.
constexpr uint64_t lane_bits(int lane_size, int from, int to) {
    uint64_t mask = 0;
    for (int lane = 0; lane < 64; lane += lane_size) {
        mask |= ((uint64_t{1} << (to - from)) - 1) << (lane + from);
    }
    return mask;
}

template <int Bits>
inline uint64_t pack8(uint64_t bytes) {
    uint64_t x = bytes;
    x = (x & lane_bits(16, 0, Bits)) | ((x >> (8 - Bits)) & lane_bits(16, Bits, 2 * Bits));
    x = (x & lane_bits(32, 0, 2 * Bits)) |
        ((x >> (16 - 2 * Bits)) & lane_bits(32, 2 * Bits, 4 * Bits));
    if constexpr (Bits == 8) {
        return x;
    } else {
        return (x & lane_bits(64, 0, 4 * Bits)) |
               ((x >> (32 - 4 * Bits)) & lane_bits(64, 4 * Bits, 8 * Bits));
    }
}

// std::round (half away from zero) without the libm call: trunc is one instruction here.
CHERENKOV_AVX2 inline float round_half_away(float x) {
    const float truncated = std::trunc(x);
    return std::fabs(x - truncated) >= 0.5F ? truncated + std::copysign(1.0F, x) : truncated;
}

// Codes of 32 values as 32 bytes in order: x → round half away from zero of (x - bias) / scale,
// clamped to [0, n_bins]. Every step is exact or correctly rounded per lane, as in the scalar
// std::round / std::clamp path.
CHERENKOV_AVX2 inline void codes32(const float* values, __m256 bias, __m256 scale, __m256 n_bins,
                                   uint8_t* out) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0F);
    const __m256 half = _mm256_set1_ps(0.5F);
    const __m256 one = _mm256_set1_ps(1.0F);
    __m256i q[4];
    for (size_t part = 0; part < 4; ++part) {
        const __m256 x =
            _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(values + 8 * part), bias), scale);
        const __m256 truncated = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 fraction = _mm256_sub_ps(x, truncated);  // exact
        const __m256 at_least_half =
            _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, fraction), half, _CMP_GE_OQ);
        const __m256 step =
            _mm256_and_ps(at_least_half, _mm256_or_ps(one, _mm256_and_ps(x, sign_bit)));
        __m256 rounded = _mm256_add_ps(truncated, step);
        rounded = _mm256_min_ps(_mm256_max_ps(rounded, _mm256_setzero_ps()), n_bins);
        q[part] = _mm256_cvttps_epi32(rounded);
    }
    const __m256i words01 = _mm256_packus_epi32(q[0], q[1]);  // [q0 0-3, q1 0-3 | q0 4-7, q1 4-7]
    const __m256i words23 = _mm256_packus_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_packus_epi16(words01, words23);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

template <int Bits>
CHERENKOV_AVX2 void quantize_row_bits(std::span<const float> row, int group_size, std::byte* codes,
                                      std::byte* scales, std::byte* biases,
                                      ScalarGroupQuantizer scalar_group) {
    const float n_bins = static_cast<float>((1U << Bits) - 1);
    const float eps = 1e-7F;
    const auto group = static_cast<size_t>(group_size);
    const size_t n_groups = row.size() / group;
    const size_t group_code_bytes = group * Bits / 8;
    alignas(32) uint8_t q[128];
    for (size_t index = 0; index < n_groups; ++index) {
        const float* values = row.data() + index * group;
        std::byte* group_codes = codes + index * group_code_bytes;
        __m256 low = _mm256_loadu_ps(values);
        __m256 high = low;
        __m256 unordered = _mm256_cmp_ps(low, low, _CMP_UNORD_Q);
        for (size_t k = 8; k < group; k += 8) {
            const __m256 v = _mm256_loadu_ps(values + k);
            low = _mm256_min_ps(low, v);
            high = _mm256_max_ps(high, v);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        if (_mm256_movemask_ps(unordered) != 0) {
            scalar_group(values, Bits, group_size, group_codes, scales + index * 2,
                         biases + index * 2);
            continue;
        }
        // The group parameters exactly as the portable quantizer computes them.
        const float wmin = horizontal_min(low);
        const float wmax = std::max(horizontal_max(high), 0.0F);
        float scale0 = std::max((wmax - wmin) / n_bins, eps);
        const bool side = std::fabs(wmin) > std::fabs(wmax);
        if (!side) scale0 = -scale0;
        const float edge = side ? wmin : wmax;
        const float q0 = round_half_away(edge / scale0);
        float scale = scale0;
        float bias = 0.0F;
        if (q0 != 0.0F) {
            scale = edge / q0;
            bias = edge;
        }
        const uint16_t scale_bf16 = float_to_bf16(scale);
        const uint16_t bias_bf16 = float_to_bf16(bias);
        std::memcpy(scales + index * 2, &scale_bf16, 2);
        std::memcpy(biases + index * 2, &bias_bf16, 2);

        for (size_t k = 0; k < group; k += 32) {
            codes32(values + k, _mm256_set1_ps(bias), _mm256_set1_ps(scale), _mm256_set1_ps(n_bins),
                    q + k);
        }
        for (size_t piece = 0; piece < group / 8; ++piece) {
            uint64_t bytes = 0;
            std::memcpy(&bytes, q + 8 * piece, 8);
            const uint64_t packed = pack8<Bits>(bytes);
            std::memcpy(group_codes + piece * Bits, &packed, Bits);
        }
    }
}

// Codes 8·piece .. 8·piece+7 as int32 lanes (8 codes take exactly Bits bytes).
template <int Bits>
CHERENKOV_AVX2 inline __m256i unpack8(const uint8_t* codes, uint64_t piece) {
    if constexpr (Bits == 8) {
        return _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + 8 * piece)));
    } else {
        static_assert(Bits == 2 || Bits == 4);
        uint32_t word = 0;
        std::memcpy(&word, codes + Bits * piece, Bits);
        const __m256i shifts =
            _mm256_setr_epi32(0, Bits, 2 * Bits, 3 * Bits, 4 * Bits, 5 * Bits, 6 * Bits, 7 * Bits);
        return _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
            _mm256_set1_epi32((1 << Bits) - 1));
    }
}

template <int Bits>
CHERENKOV_AVX2 void dequantize_row_bits(const uint8_t* codes, const std::byte* scales,
                                        const std::byte* biases, uint64_t cols, int group_size,
                                        float* out) {
    const auto group = static_cast<uint64_t>(group_size);
    for (uint64_t c0 = 0; c0 < cols; c0 += group) {
        uint16_t scale_bits = 0;
        uint16_t bias_bits = 0;
        std::memcpy(&scale_bits, scales + c0 / group * 2, 2);
        std::memcpy(&bias_bits, biases + c0 / group * 2, 2);
        const __m256 scale = _mm256_set1_ps(bf16_to_float(scale_bits));
        const __m256 bias = _mm256_set1_ps(bf16_to_float(bias_bits));
        for (uint64_t c8 = c0; c8 < c0 + group; c8 += 8) {
            const __m256 q = _mm256_cvtepi32_ps(unpack8<Bits>(codes, c8 / 8));
            _mm256_storeu_ps(out + c8, _mm256_add_ps(_mm256_mul_ps(scale, q), bias));
        }
    }
}

}  // namespace

bool dequantize_row_avx2(const uint8_t* codes, const std::byte* scales, const std::byte* biases,
                         uint64_t cols, int bits, int group_size, float* out) {
    if (group_size % 8 != 0) return false;
    switch (bits) {
        case 2: dequantize_row_bits<2>(codes, scales, biases, cols, group_size, out); return true;
        case 4: dequantize_row_bits<4>(codes, scales, biases, cols, group_size, out); return true;
        case 8: dequantize_row_bits<8>(codes, scales, biases, cols, group_size, out); return true;
        default: return false;
    }
}

bool quantize_row_avx2(std::span<const float> row, int bits, int group_size, std::byte* codes,
                       std::byte* scales, std::byte* biases, ScalarGroupQuantizer scalar_group) {
    if (group_size % 32 != 0 || group_size > 128) return false;
    switch (bits) {
        case 2:
            quantize_row_bits<2>(row, group_size, codes, scales, biases, scalar_group);
            return true;
        case 3:
            quantize_row_bits<3>(row, group_size, codes, scales, biases, scalar_group);
            return true;
        case 4:
            quantize_row_bits<4>(row, group_size, codes, scales, biases, scalar_group);
            return true;
        case 5:
            quantize_row_bits<5>(row, group_size, codes, scales, biases, scalar_group);
            return true;
        case 6:
            quantize_row_bits<6>(row, group_size, codes, scales, biases, scalar_group);
            return true;
        case 8:
            quantize_row_bits<8>(row, group_size, codes, scales, biases, scalar_group);
            return true;
        default: return false;
    }
}

}  // namespace cherenkov::store
