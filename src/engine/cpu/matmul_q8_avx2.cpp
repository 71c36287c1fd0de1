// AVX2 kernels for 4-bit weights against int8 activations (ActivationPrecision::Q8; the order is
// in matmul_kernels.h). One group of 64 columns is one 32-byte load of codes: its low nibbles
// are the even columns, its high nibbles the odd ones, and the activations are laid out to
// match, so two byte multiply-adds (vpmaddubsw: 32 unsigned × signed products summed in pairs)
// and one word multiply-add give the group's eight exact integer lane sums; one conversion and
// one fused multiply-add per group fold them into float. That is about a quarter of the
// instructions of the float kernels' per-column decode and multiply, so decode streams weights
// closer to memory speed and prefill does more multiply-adds a cycle.
#include <immintrin.h>

#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/matmul_q8_tiles.h"
#include "engine/cpu/prefetch.h"

#define CHERENKOV_AVX2 __attribute__((target("avx2,fma")))

namespace cherenkov::engine::matmul_detail {
namespace {

// y for input rows t0 .. t0+NT-1 and weight rows row0 .. row0+NW-1; Blocks = group_size / 64.
template <int NT, int NW, int Blocks>
CHERENKOV_AVX2 void q8_tile(const Q8Call& call, int64_t row0, int64_t t0) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    const size_t row_bytes = w.row_code_bytes();
    const __m256i low_nibbles = _mm256_set1_epi8(15);
    const __m256i ones = _mm256_set1_epi16(1);

    const q8::TileRows<NT, NW> tile_rows(call, row0, t0);
    const auto& codes = tile_rows.codes;
    const auto& xq = tile_rows.xq;
    const auto& dx = tile_rows.dx;

    __m256 acc[NT][NW];
    q8::clear(acc);
    alignas(32) float steps[NT][NW][8];  // the current octet's (store_steps, at group % 8 == 0)
    for (int64_t group = 0; group < n_groups; ++group) {
        const int64_t lane = group % 8;
        if (lane == 0) q8::store_steps<NT, NW>(w, row0, dx, group, steps);
        // 16-bit pair sums of the group, at most Blocks · 2 · 15 · 127. With one block they go
        // straight into the float lanes, which keeps the tile within the 16 ymm registers.
        __m256i pairs[NT][NW];
#pragma GCC unroll 4
        for (int block = 0; block < Blocks; ++block) {
            const size_t column = static_cast<size_t>(group * w.group_size + block * 64);
            __m256i low[NW];
            __m256i high[NW];
#pragma GCC unroll 16
            for (int r = 0; r < NW; ++r) {
                // Each new cache line of codes: the same line of the next tile's row.
                if (t0 == 0 && column % 128 == 0)
                    prefetch_next_tile(codes[r] + column / 2, NW * row_bytes);
                const __m256i bytes =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes[r] + column / 2));
                low[r] = _mm256_and_si256(bytes, low_nibbles);
                high[r] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_nibbles);
            }
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) {
                const __m256i even =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + column));
                const __m256i odd =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + column + 32));
#pragma GCC unroll 16
                for (int r = 0; r < NW; ++r) {
                    __m256i sums = _mm256_add_epi16(_mm256_maddubs_epi16(low[r], even),
                                                    _mm256_maddubs_epi16(high[r], odd));
                    if (block > 0) sums = _mm256_add_epi16(pairs[t][r], sums);
                    if (block + 1 < Blocks) {
                        pairs[t][r] = sums;
                        continue;
                    }
                    q8::fold(acc[t][r], _mm256_cvtepi32_ps(_mm256_madd_epi16(sums, ones)),
                             steps[t][r][lane]);
                }
            }
        }
    }
    q8::finish_tile<NT, NW>(call, row0, t0, acc);
}

template <int NT, int NW, int Blocks>
struct Avx2Tile {
    CHERENKOV_AVX2 static void run(const Q8Call& call, int64_t row0, int64_t t0) {
        q8_tile<NT, NW, Blocks>(call, row0, t0);
    }
};

// 32 int32 lanes (four vectors, in order) as 32 int8 in order; values are within [-127, 127].
CHERENKOV_AVX2 inline __m256i pack_bytes(__m256i a, __m256i b, __m256i c, __m256i d) {
    // The packs interleave 128-bit halves; the permutation puts the 4-byte pieces back in order.
    const __m256i words = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

CHERENKOV_AVX2 void quantize_q8_rows_avx2(const float* x, size_t x_stride, int64_t cols,
                                          int group_size, int64_t row_begin, int64_t row_end,
                                          int8_t* xq, float* dx, float* qsum) {
    const int64_t n_groups = cols / group_size;
    const __m256 sign = _mm256_set1_ps(-0.0F);
    for (int64_t t = row_begin; t < row_end; ++t) {
        const float* xr = x + static_cast<size_t>(t) * x_stride;
        int8_t* out = xq + static_cast<size_t>(t * cols);
        for (int64_t group = 0; group < n_groups; ++group) {
            const float* xg = xr + group * group_size;
            __m256 amax = _mm256_setzero_ps();
            for (int c = 0; c < group_size; c += 8) {
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xg + c)));
            }
            __m128 half = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
            half = _mm_max_ps(half, _mm_movehl_ps(half, half));
            half = _mm_max_ss(half, _mm_shuffle_ps(half, half, 1));
            const float max_magnitude = _mm_cvtss_f32(half);
            const float inverse = max_magnitude > 0.0F ? 127.0F / max_magnitude : 0.0F;
            dx[t * n_groups + group] = max_magnitude / 127.0F;
            const __m256 scale = _mm256_set1_ps(inverse);
            __m256i total = _mm256_setzero_si256();
            for (int block = 0; block < group_size; block += 64) {
                __m256i even[4];
                __m256i odd[4];
                for (int k = 0; k < 4; ++k) {
                    // Columns 16k .. 16k+15 of the block: shuffle_ps takes the even (odd) ones of
                    // each 128-bit half, permute4x64 puts the halves' pieces in column order.
                    const __m256 a = _mm256_loadu_ps(xg + block + 16 * k);
                    const __m256 b = _mm256_loadu_ps(xg + block + 16 * k + 8);
                    const __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(
                        _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
                    const __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(
                        _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
                    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
                    even[k] =
                        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(e, scale), kNearest));
                    odd[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(o, scale), kNearest));
                }
                const __m256i even_bytes = pack_bytes(even[0], even[1], even[2], even[3]);
                const __m256i odd_bytes = pack_bytes(odd[0], odd[1], odd[2], odd[3]);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + group * group_size + block),
                                    even_bytes);
                _mm256_storeu_si256(
                    reinterpret_cast<__m256i*>(out + group * group_size + block + 32), odd_bytes);
                // The block's integer sum: bytes times one, summed in pairs, then in words.
                const __m256i ones = _mm256_set1_epi8(1);
                const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(ones, even_bytes),
                                                       _mm256_maddubs_epi16(ones, odd_bytes));
                total = _mm256_add_epi32(total, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
            }
            alignas(32) int32_t lanes[8];
            _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
            int32_t sum = 0;
            for (const int32_t lane : lanes) sum += lane;
            qsum[t * n_groups + group] = dx[t * n_groups + group] * static_cast<float>(sum);
        }
    }
}

void affine_q8_rows_avx2(const Q8Call& call, int64_t row_begin, int64_t row_end) {
    // 3 input × 2 weight rows: 6 accumulators, the unpacked codes and the activations fill the
    // 16 ymm registers (4 × 2 spills and was slower).
    q8::rows_of_any_group<Avx2Tile, 3, 2>(call, row_begin, row_end);
}

}  // namespace cherenkov::engine::matmul_detail
