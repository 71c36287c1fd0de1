// Building blocks of the tensor-core affine kernels (affine_gemv_mma.cu, and any kernel that
// multiplies MLX-affine codes on the tensor cores): exact bf16 decoding of packed codes, the
// mma.sync m16n8k16 bf16 → float32 wrapper, bf16 packing and evict-first weight loads.
//
// Why exact integers: a code q (0 … 2^bits − 1) is exact in bf16, so q·x_hi and q·x_lo are exact
// float32 products inside the mma and the only roundings are float32 additions; scale and bias
// are applied per group in float32 afterwards (scale·Σqx + bias·Σx), as the CPU does.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {

__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t mask, uint32_t bits) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));  // (a&b)|c
    return d;
}

__device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {  // round to nearest
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(high), "f"(low));
    return d;
}

__device__ __forceinline__ float bf16_low(uint32_t v) {
    return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf16_high(uint32_t v) {
    return __uint_as_float(v & 0xFFFF0000U);
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) {
    return __uint_as_float(bits << 16);
}

// One word of codes → bf16x2 registers r[q] = (code q, code q + 16/Bits), exact integers.
// A field under the exponent of 128 (bf16 0x4300, unit last place 1) reads 128 + field; the
// field may sit p bits up (bits 0..6 are mantissa) and an FMA by 2^-p minus 128·2^-p leaves it.
template <int Bits>
__device__ __forceinline__ void decode_word(uint32_t w, uint32_t (&r)[16 / Bits]) {
    constexpr uint32_t kExp = 0x43004300U;
    if constexpr (Bits == 4) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            r[q] = bf16x2_fma(and_or(w >> (4 * q), 0x000F000FU, kExp), 0x3F803F80U, 0xC300C300U);
        }
    } else if constexpr (Bits == 2) {
        // Field q at bit 2q: shift by 0, 6 or 12, leaving it at p = 0, 2 or 4.
        constexpr uint32_t kScale[3] = {0x3F803F80U, 0x3E803E80U, 0x3D803D80U};   // 1, 1/4, 1/16
        constexpr uint32_t kOffset[3] = {0xC300C300U, 0xC200C200U, 0xC100C100U};  // −128·2^−p
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const int shift = (2 * q) / 6 * 6;
            const int p = 2 * q - shift;
            r[q] = bf16x2_fma(and_or(w >> shift, 0x00030003U << p, kExp), kScale[p / 2],
                              kOffset[p / 2]);
        }
    } else {
        static_assert(Bits == 8);
        // Byte i under the exponent of 2^23 (0x4B000000) reads 2^23 + byte exactly.
        float f[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            f[i] = __uint_as_float(__byte_perm(w, 0x4B000000U, 0x7650U | i)) - 8388608.0F;
        }
        r[0] = pack_bf16x2(f[0], f[2]);
        r[1] = pack_bf16x2(f[1], f[3]);
    }
}

// decode_word<4> without its FMA: r[q] = (128 + code q, 128 + code q + 4), exact in bf16. A
// caller that has Σx at hand takes 128·Σx out of the dot product afterwards, one FMA per row and
// group instead of four per word (the decode is most of a tensor-core GEMV's instructions).
__device__ __forceinline__ void decode_word_plus_128(uint32_t w, uint32_t (&r)[4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) r[q] = and_or(w >> (4 * q), 0x000F000FU, 0x43004300U);
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int Words>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t (&w)[Words]) {
    // Weights are read once per call: evict-first keeps them from pushing x out of the caches.
    if constexpr (Words == 1) {
        w[0] = __ldcs(reinterpret_cast<const unsigned int*>(p));
    } else if constexpr (Words == 2) {
        const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p));
        w[0] = v.x;
        w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < Words / 4; ++i) {
            const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p) + i);
            w[4 * i + 0] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    }
}

// The same from shared memory (4-, 8- or 16-byte aligned).
template <int Words>
__device__ __forceinline__ void load_shared_words(const uint8_t* p, uint32_t (&w)[Words]) {
    if constexpr (Words == 1) {
        w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else if constexpr (Words == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w[0] = v.x;
        w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < Words / 4; ++i) {
            const uint4 v = reinterpret_cast<const uint4*>(p)[i];
            w[4 * i + 0] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    }
}

// The per-lane layout of one group of codes: lane c of a row's quad owns the c-th quarter of
// every group (kChunkWords words), decoded word by word into bf16x2 registers.
template <int Bits, int G>
struct CodeLayout {
    static constexpr int kChunkWords = G * Bits / 128;  // words per lane, row and group
    static constexpr int kRegsPerWord = 16 / Bits;      // bf16x2 registers per decoded word
    static constexpr int kStepsPerWord = 8 / Bits;      // k16 steps per word
    static constexpr int kStepsPerGroup = G / 16;
    static constexpr int kCodesPerWord = 32 / Bits;
    static constexpr int kPairOffset = 16 / Bits;  // columns between a register's two halves
    static constexpr int kGroupBytes = G * Bits / 8;
    static_assert(kChunkWords >= 1 && kChunkWords * kStepsPerWord == kStepsPerGroup);
};

// The (bits, group size) the tensor-core kernels decode: 2- and 4-bit codes in groups of 64 or
// 128, 8-bit codes in groups of 64 (8-bit group 128 needs more registers than the kernels have).
__host__ __device__ constexpr bool mma_code_shape(int bits, int group_size) {
    return (group_size == 64 && (bits == 2 || bits == 4 || bits == 8)) ||
           (group_size == 128 && (bits == 2 || bits == 4));
}

// Calls f(integral_constant<int, Bits>{}, integral_constant<int, G>{}) for a runtime shape that
// mma_code_shape() takes: the one switch from runtime (bits, group) to template arguments.
// `what` names the caller in the error for any other shape.
template <typename F>
void with_code_shape(int bits, int group_size, const char* what, F&& f) {
    using std::integral_constant;
    switch (bits * 1000 + group_size) {
        case 2064: f(integral_constant<int, 2>{}, integral_constant<int, 64>{}); break;
        case 2128: f(integral_constant<int, 2>{}, integral_constant<int, 128>{}); break;
        case 4064: f(integral_constant<int, 4>{}, integral_constant<int, 64>{}); break;
        case 4128: f(integral_constant<int, 4>{}, integral_constant<int, 128>{}); break;
        case 8064: f(integral_constant<int, 8>{}, integral_constant<int, 64>{}); break;
        default: throw_internal(std::string("[") + what + "] unchecked bit width or group size");
    }
}

// The register stage ring of the kernels that load weights straight into registers: one group's
// loads for a lane, the codes of rows g and g + 8 of each of Tiles tiles and their scale and bias
// (bf16 bits in 32-bit registers: no 16-bit merges when stages move) ...
template <int Bits, int G, int Tiles>
struct GroupStage {
    uint32_t codes[Tiles][2][CodeLayout<Bits, G>::kChunkWords];
    uint32_t scale[Tiles][2];
    uint32_t bias[Tiles][2];
};

// ... from these rows: this lane's quarter of group 0 of rows g and g + 8, and their parameters.
template <int Tiles>
struct LaneRows {
    const uint8_t* codes[Tiles][2];
    const uint16_t* scales[Tiles][2];
    const uint16_t* biases[Tiles][2];
};

// Loads group `group` of the rows into `st` (nothing at or past `end`).
template <int Bits, int G, int Tiles>
__device__ __forceinline__ void load_stage(GroupStage<Bits, G, Tiles>& st,
                                           const LaneRows<Tiles>& rows, int group, int end) {
    if (group >= end) return;
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            load_words(
                rows.codes[tile][h] + static_cast<size_t>(group) * CodeLayout<Bits, G>::kGroupBytes,
                st.codes[tile][h]);
            st.scale[tile][h] = __ldg(rows.scales[tile][h] + group);
            st.bias[tile][h] = __ldg(rows.biases[tile][h] + group);
        }
    }
}

// Takes a stage's codes and parameters out (so the stage can be refilled before the arithmetic).
template <int Bits, int G, int Tiles>
__device__ __forceinline__ void unpack_stage(
    const GroupStage<Bits, G, Tiles>& st,
    uint32_t (&words)[Tiles][2][CodeLayout<Bits, G>::kChunkWords], float (&scale)[Tiles][2],
    float (&bias)[Tiles][2]) {
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int w = 0; w < CodeLayout<Bits, G>::kChunkWords; ++w) {
                words[tile][h][w] = st.codes[tile][h][w];
            }
            scale[tile][h] = bf16_bits_to_float(st.scale[tile][h]);
            bias[tile][h] = bf16_bits_to_float(st.bias[tile][h]);
        }
    }
}

// B fragments of groups [g0, g0 + n_groups) for input rows t < R, into `region`, entries
// first_entry, first_entry + stride, … (a lane of a warp: 32; a thread of a block: blockDim.x):
// entry (step s, slot n, lane quarter c) at (s·2R + n)·4 + c, so lane n·4 + c of a step reads
// consecutive uint2.
// x as it is read (build_b's default map).
struct PlainInput {
    __device__ __forceinline__ float operator()(float v) const { return v; }
};

template <int Bits, int G, int R, typename Map = PlainInput>
__device__ __forceinline__ void build_b(uint2* region, const float* x, size_t x_stride, int g0,
                                        int n_groups, int first_entry, int stride,
                                        Map map = Map{}) {
    using S = CodeLayout<Bits, G>;
    const int entries = n_groups * S::kStepsPerGroup * R * 4;
    for (int i = first_entry; i < entries; i += stride) {
        const int c = i & 3;
        const int t = (i >> 2) % R;
        const int s = (i >> 2) / R;
        const int step = g0 * S::kStepsPerGroup + s;
        const int group = step / S::kStepsPerGroup;
        const int in_group = step % S::kStepsPerGroup;
        const int word = in_group / S::kStepsPerWord;
        const int in_word = in_group % S::kStepsPerWord;
        const int a = group * G + c * (G / 4) + word * S::kCodesPerWord + 2 * in_word;
        const float* xr = x + static_cast<size_t>(t) * x_stride;
        float2 first = *reinterpret_cast<const float2*>(xr + a);
        float2 second = *reinterpret_cast<const float2*>(xr + a + S::kPairOffset);
        first = make_float2(map(first.x), map(first.y));
        second = make_float2(map(second.x), map(second.y));
        const uint32_t hi0 = pack_bf16x2(first.x, second.x);
        const uint32_t hi1 = pack_bf16x2(first.y, second.y);
        const uint32_t lo0 = pack_bf16x2(first.x - bf16_low(hi0), second.x - bf16_high(hi0));
        const uint32_t lo1 = pack_bf16x2(first.y - bf16_low(hi1), second.y - bf16_high(hi1));
        region[(s * 2 * R + 2 * t) * 4 + c] = make_uint2(hi0, hi1);
        region[(s * 2 * R + 2 * t + 1) * 4 + c] = make_uint2(lo0, lo1);
    }
}

// One quantization group for a warp's Tiles 16-row tiles: lane (g, c) holds words[tile][h] of
// rows g (h = 0) and g + 8 (h = 1) of each tile (its quarter of the group), b_group the group's
// B fragments (8R uint2 per k16 step, read by lanes < 8R), and each row's bf16 scale and bias
// as float. Adds scale·Σq·x + bias·Σx of the group to total[tile][h] for input row t = c (lanes
// with c ≥ R add sums of the zero slots). Σx comes from one more mma with A = ones.
template <int Bits, int G, int R, int Tiles>
__device__ __forceinline__ void multiply_group(
    const uint32_t (&words)[Tiles][2][CodeLayout<Bits, G>::kChunkWords], const uint2* b_group,
    int lane, const float (&scale)[Tiles][2], const float (&bias)[Tiles][2],
    float (&total)[Tiles][2]) {
    using S = CodeLayout<Bits, G>;
    constexpr uint32_t kOnes = 0x3F803F80U;  // bf16 (1, 1)
    // 4-bit codes are multiplied as 128 + q; 128·Σx leaves the sum before the scale.
    constexpr bool kPlus128 = Bits == 4;
    float acc[Tiles][4] = {};
    float xs[4] = {};
#pragma unroll
    for (int w = 0; w < S::kChunkWords; ++w) {
        // Decoded one word at a time: 4 live registers per row instead of a group's.
        uint32_t a[Tiles][2][S::kRegsPerWord];
#pragma unroll
        for (int tile = 0; tile < Tiles; ++tile) {
            if constexpr (kPlus128) {
                decode_word_plus_128(words[tile][0][w], a[tile][0]);
                decode_word_plus_128(words[tile][1][w], a[tile][1]);
            } else {
                decode_word<Bits>(words[tile][0][w], a[tile][0]);
                decode_word<Bits>(words[tile][1][w], a[tile][1]);
            }
        }
#pragma unroll
        for (int s = 0; s < S::kStepsPerWord; ++s) {
            const int step = w * S::kStepsPerWord + s;
            const uint2 b = lane < 8 * R ? b_group[step * 8 * R + lane] : make_uint2(0, 0);
#pragma unroll
            for (int tile = 0; tile < Tiles; ++tile) {
                mma_bf16(acc[tile], a[tile][0][2 * s], a[tile][1][2 * s], a[tile][0][2 * s + 1],
                         a[tile][1][2 * s + 1], b.x, b.y);
            }
            mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, b.x, b.y);
        }
    }
    const float x_sum = xs[0] + xs[1];
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float dot = acc[tile][2 * h] + acc[tile][2 * h + 1];
            if constexpr (kPlus128) dot = fmaf(-128.0F, x_sum, dot);
            total[tile][h] = fmaf(scale[tile][h], dot, total[tile][h]);
            total[tile][h] = fmaf(bias[tile][h], x_sum, total[tile][h]);
        }
    }
}

// The k_split warps of a tile set add their column ranges' sums in a fixed order (part 0 first),
// through `partial` (shared memory, [warps][Tiles][2][32] floats). Contains __syncthreads: call
// from every thread of the block. Returns whether this warp holds the sums (part 0).
template <int Tiles>
__device__ __forceinline__ int partial_slot(int warp, int tile, int h, int lane) {
    return ((warp * Tiles + tile) * 2 + h) * 32 + lane;
}

template <int Tiles>
__device__ __forceinline__ bool add_parts(float (&total)[Tiles][2], float* partial, int warp,
                                          int part, int k_split, int lane) {
    if (k_split == 1) return true;
    const auto at = [&](int w, int tile, int h) { return partial_slot<Tiles>(w, tile, h, lane); };
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
        for (int h = 0; h < 2; ++h) partial[at(warp, tile, h)] = total[tile][h];
    }
    __syncthreads();
    if (part != 0) return false;
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float sum = partial[at(warp, tile, h)];
            for (int k = 1; k < k_split; ++k) sum += partial[at(warp + k, tile, h)];
            total[tile][h] = sum;
        }
    }
    return true;
}

// Writes a tile set's outputs: lane (g, c) holds input row t = c (< R) of rows g and g + 8 of
// each 16-row tile. SwiGLU: tile 0 is gate and tile 1 up of the same rows set_row0 + …, and
// y gets silu(gate)·up; otherwise tile i covers rows set_row0 + 16i + …. Rows ≥ rows are skipped.
template <int R, bool SwiGLU, int Tiles>
__device__ __forceinline__ void store_tile_set(const float (&total)[Tiles][2], float* y,
                                               size_t y_stride, int set_row0, int rows, int lane) {
    const int g = lane >> 2;
    const int c = lane & 3;
    if (c >= R) return;
    float* yt = y + static_cast<size_t>(c) * y_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if constexpr (SwiGLU) {
            const int row = set_row0 + g + 8 * h;
            if (row < rows) yt[row] = silu_f(total[0][h]) * total[1][h];
        } else {
#pragma unroll
            for (int tile = 0; tile < Tiles; ++tile) {
                const int row = set_row0 + 16 * tile + g + 8 * h;
                if (row < rows) yt[row] = total[tile][h];
            }
        }
    }
}

}  // namespace cherenkov::engine::cuda
