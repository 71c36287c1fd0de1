// AVX-512 VNNI kernels for 4-bit weights against int8 activations (ActivationPrecision::Q8; the
// order is in matmul_kernels.h). One 64-byte load of codes holds two 64-column blocks; its low
// nibbles are the blocks' even columns, its high nibbles the odd ones. Two vpdpbusd (64 unsigned
// × signed byte products summed in fours into 16 int32 lanes) give both blocks' eight exact lane
// sums at once, where AVX2 needs four multiply-adds and an add per block. The integer sums are
// exact, so converting them and folding them into the float lanes with the same fused
// multiply-adds, group by group, gives the AVX2 kernel's bits.
// GCC 12's AVX-512 headers build 512-to-256-bit casts and extracts on a self-initialized
// "undefined" pass-through, which -Wmaybe-uninitialized reports at every inlined use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/matmul_q8_tiles.h"
#include "engine/cpu/prefetch.h"

#define CHERENKOV_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

namespace cherenkov::engine::matmul_detail {
namespace {

// The 16 int32 sums of 128 columns (two 64-column blocks) of one weight row against one input
// row: lanes 0-7 the first block's eight lane sums, lanes 8-15 the second's.
CHERENKOV_AVX512 inline __m512i block_pair_sums(__m512i low, __m512i high, __m512i even,
                                                __m512i odd) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), low, even), high, odd);
}

// One 64-column block's eight lane sums (the 256-bit form, for a last odd block).
CHERENKOV_AVX512 inline __m256i block_sums(__m256i low, __m256i high, __m256i even, __m256i odd) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), low, even), high, odd);
}

// The even (odd) activation halves of two consecutive 64-column blocks at xq: each block is its
// 32 even columns then its 32 odd ones, so the halves are gathered from both blocks.
CHERENKOV_AVX512 inline void load_block_pair(const int8_t* xq, __m512i* even, __m512i* odd) {
    const __m512i first = _mm512_loadu_si512(xq);
    const __m512i second = _mm512_loadu_si512(xq + 64);
    // Quadword indices: 0-7 are `first`'s, 8-15 `second`'s.
    *even = _mm512_permutex2var_epi64(first, _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11), second);
    *odd = _mm512_permutex2var_epi64(first, _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15), second);
}

CHERENKOV_AVX512 inline __m256i low_half(__m512i v) {
    return _mm512_castsi512_si256(v);
}

CHERENKOV_AVX512 inline __m256i high_half(__m512i v) {
    return _mm512_extracti64x4_epi64(v, 1);
}

CHERENKOV_AVX512 inline __m256 high_floats(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// y for input rows t0 .. t0+NT-1 and weight rows row0 .. row0+NW-1; Blocks = group_size / 64.
template <int NT, int NW, int Blocks>
CHERENKOV_AVX512 void q8_tile(const Q8Call& call, int64_t row0, int64_t t0) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    const int64_t n_blocks = n_groups * Blocks;
    const size_t row_bytes = w.row_code_bytes();
    const __m512i low_nibbles = _mm512_set1_epi8(15);

    const q8::TileRows<NT, NW> tile_rows(call, row0, t0);
    const auto& codes = tile_rows.codes;
    const auto& xq = tile_rows.xq;
    const auto& dx = tile_rows.dx;

    __m256 acc[NT][NW];
    q8::clear(acc);
    alignas(32) float steps[NT][NW][8];  // the current octet's (store_steps, at group % 8 == 0)
    int64_t block = 0;
    for (; block + 2 <= n_blocks; block += 2) {
        const size_t column = static_cast<size_t>(block * 64);
        // Groups start on even blocks (Blocks is 1 or 2), so the octet's first group is first.
        const int64_t group = block / Blocks;
        const int64_t lane = group % 8;
        if (lane == 0) q8::store_steps<NT, NW>(w, row0, dx, group, steps);
        __m512i low[NW];
        __m512i high[NW];
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            // This cache line of the next tile's row (prefetch.h).
            if (t0 == 0) prefetch_next_tile(codes[r] + column / 2, NW * row_bytes);
            const __m512i bytes = _mm512_loadu_si512(codes[r] + column / 2);
            low[r] = _mm512_and_si512(bytes, low_nibbles);
            high[r] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_nibbles);
        }
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            __m512i even;
            __m512i odd;
            load_block_pair(xq[t] + column, &even, &odd);
#pragma GCC unroll 16
            for (int r = 0; r < NW; ++r) {
                const __m512i sums = block_pair_sums(low[r], high[r], even, odd);
                if constexpr (Blocks == 2) {
                    // One group of 128 columns: its lane sums are both blocks' together.
                    const __m256i group_sums = _mm256_add_epi32(low_half(sums), high_half(sums));
                    q8::fold(acc[t][r], _mm256_cvtepi32_ps(group_sums), steps[t][r][lane]);
                } else {
                    // Two groups of 64 columns, in order, converted together. The pair starts
                    // on an even group, so both lie in one octet of steps.
                    const __m512 floats = _mm512_cvtepi32_ps(sums);
                    q8::fold(acc[t][r], _mm512_castps512_ps256(floats), steps[t][r][lane]);
                    q8::fold(acc[t][r], high_floats(floats), steps[t][r][lane + 1]);
                }
            }
        }
    }
    if (block < n_blocks) {
        // A last lone block of 64 columns (group size 64, an odd number of groups).
        const size_t column = static_cast<size_t>(block * 64);
        const int64_t group = block;
        const int64_t lane = group % 8;
        if (lane == 0) q8::store_steps<NT, NW>(w, row0, dx, group, steps);
        const __m256i low_nibbles256 = _mm256_set1_epi8(15);
#pragma GCC unroll 16
        for (int r = 0; r < NW; ++r) {
            const __m256i bytes =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes[r] + column / 2));
            const __m256i low = _mm256_and_si256(bytes, low_nibbles256);
            const __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_nibbles256);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) {
                const __m256i even =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + column));
                const __m256i odd =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + column + 32));
                q8::fold(acc[t][r], _mm256_cvtepi32_ps(block_sums(low, high, even, odd)),
                         steps[t][r][lane]);
            }
        }
    }
    q8::finish_tile<NT, NW>(call, row0, t0, acc);
}

template <int NT, int NW, int Blocks>
struct Avx512Tile {
    CHERENKOV_AVX512 static void run(const Q8Call& call, int64_t row0, int64_t t0) {
        q8_tile<NT, NW, Blocks>(call, row0, t0);
    }
};

}  // namespace

void affine_q8_rows_avx512(const Q8Call& call, int64_t row_begin, int64_t row_end) {
    // 4 input × 4 weight rows: 16 accumulators, 8 unpacked code vectors and the activations fit
    // the 32 registers; measured against 3 × 2, 4 × 2, 6 × 2 and 4 × 3 (docs/engine.md).
    q8::rows_of_any_group<Avx512Tile, 4, 4>(call, row_begin, row_end);
}

}  // namespace cherenkov::engine::matmul_detail
